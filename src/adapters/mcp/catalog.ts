import { isServerRefusal, notConnected } from "./errors.js";
import type { McpClientShape, McpToolInfo } from "./types.js";

const TOOLS_LIST_CHANGED = "notifications/tools/list_changed";

/**
 * The tools a server listed, by name: where a tool's `readOnlyHint` comes from. Filled by every
 * `listTools()` through the healed client, and by one listing of its own when a tool nobody
 * listed is called; emptied when the server says its list changed. One per client (see
 * `catalogOf`), however often the client is healed.
 */
export class ToolCatalog {
  private readonly tools = new Map<string, McpToolInfo>();
  private listing: Promise<void> | undefined;

  constructor(private readonly list: () => Promise<{ tools: readonly McpToolInfo[] }>) {}

  remember(tools: readonly McpToolInfo[]): void {
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
          if (!isServerRefusal(error)) throw error;
        },
      )
      .finally(() => {
        this.listing = undefined;
      });
    return this.listing;
  }

  /**
   * Forgets the list when the server announces a change. Through the client's fallback handler
   * (both SDKs have it), so a handler the application set for this notification keeps working
   * (and then the catalog refreshes on the next `listTools()` through the healed client).
   */
  watch(client: McpClientShape): void {
    const previous = client.fallbackNotificationHandler;
    client.fallbackNotificationHandler = async (notification) => {
      if (notification.method === TOOLS_LIST_CHANGED) this.forget();
      await previous?.(notification);
    };
  }
}

/** The catalogs by client: one list_changed watcher per client, not one per heal. */
const catalogs = new WeakMap<object, ToolCatalog>();

/**
 * Whether the client has yet to connect: no transport, or a transport whose handshake has not
 * answered (no server capabilities yet, and no session resumed: a client resuming a session by
 * its id skips the handshake). Before the handshake v2 answers an empty list (no tools
 * capability yet): that is no answer about any tool.
 */
function notYetConnected(client: McpClientShape): boolean {
  const transport = client.transport;
  if (transport === undefined) return true;
  return client.getServerCapabilities?.() === undefined && transport.sessionId === undefined;
}

/** The client's catalog, made (and its watcher installed) on the first heal. */
export function catalogOf(client: McpClientShape): ToolCatalog {
  let catalog = catalogs.get(client);
  if (!catalog) {
    catalog = new ToolCatalog(() =>
      notYetConnected(client) ? Promise.reject(notConnected()) : client.listTools(),
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
