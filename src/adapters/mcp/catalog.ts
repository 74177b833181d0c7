import type { Client, ListToolsResult, Tool } from "@modelcontextprotocol/client";

const TOOLS_LIST_CHANGED = "notifications/tools/list_changed";

/**
 * The tools a server listed, by name: where a tool's `readOnlyHint` comes from. Filled by every
 * `listTools()` through the healed client, and by one listing of its own when a tool nobody
 * listed is called; emptied when the server says its list changed.
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
   * The tool's `annotations.readOnlyHint`, undefined when it has none or the server cannot list
   * its tools (a listing that fails is not an error of the call: the caller's option decides).
   */
  async readOnlyHint(name: string): Promise<boolean | undefined> {
    if (!this.tools.has(name)) await this.refresh();
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
        () => undefined,
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
