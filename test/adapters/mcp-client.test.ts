/**
 * healMcpClient over a client built by hand, by the shape of each SDK line's Client (1.x:
 * `callTool(params, resultSchema?, options?)`; v2: `callTool(params, options?)` and
 * `getNegotiatedProtocolVersion`): the view it returns, the request timeout it owns, the
 * idempotency key it sends, one name per tool, and a call aborted while the tools are listed.
 */
import { beforeEach, describe, expect, it } from "vitest";
import { healMcpClient, type HealMcpOptions } from "../../src/adapters/mcp.js";
import type { McpClient, McpToolCall } from "../../src/adapters/mcp/types.js";
import { MAX_TIMER_MS } from "../../src/engine/options.js";
import type { SelfHealing } from "../../src/index.js";
import { configError, NO_RECOVERY, recoveryInstance } from "../helpers/engine.js";
import { recordingProvider } from "../helpers/otel.js";

const otel = recordingProvider();
beforeEach(() => {
  otel.reset();
});

/** The healed view, typed as the test uses it: the fake's members, callTool taking either line's arguments. */
type View = FakeClient & { callTool(params: McpToolCall, ...rest: unknown[]): Promise<unknown> };
const heal = (sh: SelfHealing, client: FakeClient, options?: HealMcpOptions): View =>
  healMcpClient(sh, client as unknown as McpClient, options) as unknown as View;

const spans = () => otel.named("agent.tool_call").map((s) => s.attributes);

interface Sent {
  params: Record<string, unknown>;
  schema: unknown;
  options: Record<string, unknown>;
}

/** A connected client of `line` whose server lists `tools` and answers every call "ok". */
class FakeClient {
  #sent: Sent[] = [];
  listings = 0;
  onclose: (() => void) | undefined;
  readonly transport = {};
  constructor(
    private readonly tools: { name: string; annotations?: { readOnlyHint?: boolean } }[] = [],
    private readonly listing: () => Promise<void> = () => Promise.resolve(),
  ) {}
  getServerCapabilities() {
    return { tools: {} };
  }
  async listTools() {
    this.listings++;
    await this.listing();
    return { tools: this.tools.map((t) => ({ inputSchema: { type: "object" }, ...t })) };
  }
  callTool(params: Record<string, unknown>, schema?: unknown, options?: Record<string, unknown>) {
    this.#sent.push({ params, schema, options: options ?? {} });
    return Promise.resolve({ content: [{ type: "text", text: "ok" }] });
  }
  sent(): Sent[] {
    return this.#sent;
  }
}

class FakeV2Client extends FakeClient {
  getNegotiatedProtocolVersion() {
    return "2025-06-18";
  }
  override callTool(params: Record<string, unknown>, options?: Record<string, unknown>) {
    return super.callTool(params, undefined, options);
  }
}

describe("the healed view", () => {
  it("stays the client: its class, its other methods bound to it (private state), read live", async () => {
    const { sh } = recoveryInstance(otel.provider, NO_RECOVERY);
    const client = new FakeClient([{ name: "search", annotations: { readOnlyHint: true } }]);
    const healed = heal(sh, client);
    expect(healed).toBeInstanceOf(FakeClient);
    expect(healed.constructor).toBe(FakeClient);
    // Bound once, and to the client: taken off the view, it still reaches the private state.
    const sent = Reflect.get(healed, "sent");
    expect(Reflect.get(healed, "sent")).toBe(sent);
    await healed.callTool({ name: "search", arguments: {} });
    expect(sent()).toHaveLength(1);
    const closed: string[] = [];
    client.onclose = () => closed.push("first");
    healed.onclose?.();
    client.onclose = () => closed.push("second");
    healed.onclose?.();
    expect(closed).toEqual(["first", "second"]);
    expect(healed.listings).toBe(1);
  });

  it("listTools() through the view feeds the catalog: no second listing for a listed tool", async () => {
    const { sh } = recoveryInstance(otel.provider, NO_RECOVERY);
    const client = new FakeClient([{ name: "search", annotations: { readOnlyHint: true } }]);
    const healed = heal(sh, client);
    const listed = (await healed.listTools()) as { tools: unknown[] };
    expect(listed.tools).toHaveLength(1);
    await healed.callTool({ name: "search", arguments: {} });
    expect(client.listings).toBe(1);
  });
});

describe("the request timeout", () => {
  it("the caller's own timeout is the attempt's (1.x and v2), unless progress resets it or it is out of range", async () => {
    for (const Client of [FakeClient, FakeV2Client]) {
      otel.reset();
      const { sh } = recoveryInstance(otel.provider, NO_RECOVERY);
      const client = new Client([{ name: "search", annotations: { readOnlyHint: true } }]);
      const healed = heal(sh, client);
      const call = (options: Record<string, unknown>) =>
        Client === FakeClient
          ? healed.callTool({ name: "search", arguments: {} }, undefined, options)
          : (healed.callTool as (p: unknown, o: unknown) => Promise<unknown>)(
              { name: "search", arguments: {} },
              options,
            );
      const owned = [5_000, 1, MAX_TIMER_MS];
      const notOwned = [0, 1.5, MAX_TIMER_MS + 1];
      for (const timeout of [...owned, ...notOwned]) await call({ timeout });
      await call({ timeout: 5_000, resetTimeoutOnProgress: true });
      await call({});
      expect(spans().map((a) => a["selfheal.call.timeout_ms"])).toEqual([
        ...owned,
        undefined,
        undefined,
        undefined,
        undefined,
        undefined,
      ]);
      // The client is sent the caller's timeout either way; with none, the attempt's budget.
      expect(client.sent().map((s) => s.options.timeout)).toEqual([
        ...owned,
        ...notOwned,
        5_000,
        60_000,
      ]);
      expect(client.sent()[0]?.options.signal).toBeInstanceOf(AbortSignal);
    }
  });
});

describe("what a call sends", () => {
  it("a write's idempotency key in _meta, the caller's own key winning; the 1.x result schema", async () => {
    const { sh } = recoveryInstance(otel.provider, NO_RECOVERY);
    const client = new FakeClient([{ name: "charge", annotations: { readOnlyHint: false } }]);
    const healed = heal(sh, client, {
      toolOptions: {
        idempotencyKey: (args: McpToolCall) =>
          `order-${String((args.arguments as { order?: string } | undefined)?.order)}`,
      },
      propagateContext: false,
    });
    const schema = { parse: (v: unknown) => v };
    await healed.callTool({ name: "charge", arguments: { order: "7" } }, schema);
    await healed.callTool({
      name: "charge",
      arguments: { order: "8" },
      _meta: { "selfheal/idempotency-key": "mine" },
    });
    const [first, second] = client.sent();
    expect(first?.params._meta).toEqual({ "selfheal/idempotency-key": "order-7" });
    expect(first?.schema).toBe(schema);
    expect(second?.params._meta).toEqual({ "selfheal/idempotency-key": "mine" });
    // A read (no key) is sent without a _meta it did not have.
    const reads = new FakeClient([{ name: "search", annotations: { readOnlyHint: true } }]);
    await heal(sh, reads, { propagateContext: false }).callTool({ name: "search", arguments: {} });
    expect(reads.sent()[0]?.params).toStrictEqual({ name: "search", arguments: {} });
  });
});

describe("one name, one tool", () => {
  it("a tool of another client called a write under a read-only tool's name is refused, naming both", async () => {
    const { sh } = recoveryInstance(otel.provider, NO_RECOVERY);
    const reads = heal(sh, new FakeClient([{ name: "sync", annotations: { readOnlyHint: true } }]));
    await reads.callTool({ name: "sync", arguments: {} });
    const writes = heal(
      sh,
      new FakeClient([{ name: "sync", annotations: { readOnlyHint: false } }]),
    );
    const error = await writes.callTool({ name: "sync", arguments: {} }).catch((e: unknown) => e);
    expect(error).toMatchObject({ field: "healMcpClient(options).toolName" });
    expect((error as Error).message).toContain(
      'the selfheal tool "sync" only reads, but MCP tool "sync" of this client writes: give the tools of each server their own names',
    );
    // A read under a write's name shares the write (strict, but safe).
    const other = recoveryInstance(otel.provider, NO_RECOVERY).sh;
    const w = heal(other, new FakeClient([{ name: "put", annotations: { readOnlyHint: false } }]));
    await w.callTool({ name: "put", arguments: {} });
    const r = heal(other, new FakeClient([{ name: "put", annotations: { readOnlyHint: true } }]));
    await expect(r.callTool({ name: "put", arguments: {} })).resolves.toBeDefined();
    expect(configError(() => healMcpClient(other, {} as McpClient)).field).toBe(
      "healMcpClient(client)",
    );
  });
});

describe("a call aborted while the tools are listed", () => {
  it("1.x rejects with the reason; v2 with an SdkError REQUEST_TIMEOUT; nothing is sent", async () => {
    for (const Client of [FakeClient, FakeV2Client]) {
      const { sh } = recoveryInstance(otel.provider, NO_RECOVERY);
      let release!: () => void;
      const client = new Client(
        [{ name: "slow", annotations: { readOnlyHint: true } }],
        () => new Promise((r) => (release = r)),
      );
      const healed = heal(sh, client);
      const caller = new AbortController();
      const options = { signal: caller.signal };
      const call =
        Client === FakeClient
          ? healed.callTool({ name: "slow", arguments: {} }, undefined, options)
          : (healed.callTool as (p: unknown, o: unknown) => Promise<unknown>)(
              { name: "slow", arguments: {} },
              options,
            );
      const reason = new Error("user left");
      caller.abort(reason);
      const error = await call.catch((e: unknown) => e);
      release();
      if (Client === FakeClient) expect(error).toBe(reason);
      else expect(error).toMatchObject({ name: "SdkError", code: "REQUEST_TIMEOUT" });
      expect(client.sent()).toEqual([]);
    }
  });

  it("a listing that fails on the way rejects the call with the SDK's error (1.x and v2), nothing sent", async () => {
    for (const Client of [FakeClient, FakeV2Client]) {
      const { sh } = recoveryInstance(otel.provider, NO_RECOVERY);
      const broken = new Error("EPIPE");
      const client = new Client([], () => Promise.reject(broken));
      const healed = heal(sh, client);
      await expect(healed.callTool({ name: "x", arguments: {} })).rejects.toBe(broken);
      expect(client.sent()).toEqual([]);
    }
  });
});
