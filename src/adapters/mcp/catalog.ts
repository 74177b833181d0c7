import {
  ProtocolError,
  SdkError,
  SdkErrorCode,
  type Client,
  type ListToolsResult,
  type Tool,
} from "@modelcontextprotocol/client";

const TOOLS_LIST_CHANGED = "notifications/tools/list_changed";

/**
 * The tools a server listed, by name: where a tool's `readOnlyHint` comes from. Filled by every
 * `listTools()` through the healed client, and by one listing of its own when a tool nobody
 * listed is called; emptied when the server says its list changed. One per client (see
 * `catalogOf`), however often the client is healed.
 */
export class ToolCatalog {
  private readonly tools = new Map<string, Tool>();
  private listing: Promise<void> | undefined;

  constructor(private readonly list: () => Promise<ListToolsResult>) {}

  remember(tools: readonly Tool[]): void {
    for (const tool of tools) this.tools.set(tool.name, tool);
  }

  forget(): void {
    this.tools.clear();
  }

  /**
   * The tool's `annotations.readOnlyHint`, undefined when it has none or the server answers that
   * it cannot list its tools (a JSON-RPC error: the caller's option decides). A listing that
   * fails on the way (not connected, a broken pipe, a timeout) rejects with the SDK's error:
   * the verdict taken on a tool's first call is kept, so it must not be taken blind. `signal`
   * ends this caller's wait (the listing goes on for the others).
   */
  async readOnlyHint(name: string, signal?: AbortSignal): Promise<boolean | undefined> {
    if (!this.tools.has(name)) await untilAborted(this.refresh(), signal);
    const hint = this.tools.get(name)?.annotations?.readOnlyHint;
    return typeof hint === "boolean" ? hint : undefined;
  }

  /** One listing at a time, however many first calls wait on it. */
  private refresh(): Promise<void> {
    this.listing ??= this.list()
      .then(
        (result) => {
          this.remember(result.tools);
        },
        (error: unknown) => {
          if (!(error instanceof ProtocolError)) throw error;
        },
      )
      .finally(() => {
        this.listing = undefined;
      });
    return this.listing;
  }

  /**
   * Forgets the list when the server announces a change. Through the client's fallback handler,
   * so a handler the application set for this notification keeps working (and then the catalog
   * refreshes on the next `listTools()` through the healed client).
   */
  watch(client: Client): void {
    const previous = client.fallbackNotificationHandler;
    client.fallbackNotificationHandler = async (notification) => {
      if (notification.method === TOOLS_LIST_CHANGED) this.forget();
      await previous?.(notification);
    };
  }
}

/** The catalogs by client: one list_changed watcher per client, not one per heal. */
const catalogs = new WeakMap<Client, ToolCatalog>();

/** The client's catalog, made (and its watcher installed) on the first heal. */
export function catalogOf(client: Client): ToolCatalog {
  let catalog = catalogs.get(client);
  if (!catalog) {
    // Before the handshake the SDK answers an empty list (no tools capability yet): that
    // is no answer about any tool.
    catalog = new ToolCatalog(() =>
      client.getServerCapabilities() === undefined
        ? Promise.reject(new SdkError(SdkErrorCode.NotConnected, "Not connected"))
        : client.listTools(),
    );
    catalog.watch(client);
    catalogs.set(client, catalog);
  }
  return catalog;
}

/** `promise`, or the signal's reason as soon as it aborts. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      reject(signal.reason as Error);
    };
    signal.addEventListener("abort", onAbort, { once: true });
    void promise.then(resolve, reject).finally(() => {
      signal.removeEventListener("abort", onAbort);
    });
  });
}
