/**
 * The README's TypeScript snippets as the package test type-checks them: which frameworks (and
 * which versions) they are checked against, and what each snippet leaves to the reader.
 */
import { readmeBlocks, type ReadmeBlock } from "../helpers/readme.js";

/**
 * The frameworks and peers the snippets import, and the versions each is checked with. The
 * first version of each is the one this repository's own tests use (its devDependencies, as
 * installed); a test fails when they differ. More versions are checked in further rounds:
 * round `k` installs `versions[k]` of every package that has one and the first version of the
 * others, so versions that go together (a framework and its provider package) share an index.
 * A round after the first checks only the snippets that import a package it changes.
 */
export const FRAMEWORKS: readonly { name: string; versions: readonly string[] }[] = [
  { name: "ai", versions: ["6.0.325", "7.0.173"] },
  { name: "@ai-sdk/openai-compatible", versions: ["2.0.92", "3.0.92"] },
  { name: "langchain", versions: ["1.5.14"] },
  { name: "@langchain/core", versions: ["1.4.0"] },
  { name: "@modelcontextprotocol/client", versions: ["2.4.0"] },
  { name: "@modelcontextprotocol/sdk", versions: ["1.32.2"] },
  { name: "@openai/agents", versions: ["0.20.0"] },
  { name: "openai", versions: ["6.49.0"] },
  { name: "zod", versions: ["4.6.7"] },
  { name: "ioredis", versions: ["6.0.0"] },
  // selfheal/otel's declarations name types of these two optional peers.
  { name: "@opentelemetry/sdk-trace-node", versions: ["2.12.0"] },
  { name: "@opentelemetry/sdk-metrics", versions: ["2.12.0"] },
];

/**
 * What a snippet leaves to the reader, written before it: `imports` (the snippet's own import
 * lines follow them) and `declarations` (after the imports). `needs`: packages the snippet does
 * not import but whose types selfheal's declarations name (installed with it).
 */
export interface Prelude {
  imports?: string;
  declarations?: string;
  needs?: readonly string[];
}

/**
 * Every ```ts block of the README, by `heading #n` (its section's heading, n-th block in it):
 * each is type-checked, none is skipped. A block added to the README needs an entry here.
 */
export const PRELUDES: Readonly<Record<string, Prelude>> = {
  "Quick start #1": {
    declarations: `
declare const DOCS_URL: string;
declare const payments: {
  refund(id: string, options: { idempotencyKey: string | undefined }): Promise<{ id: string }>;
};`,
  },
  "Diagnosis #1": { imports: `import { createSelfHealing } from "selfheal";` },
  "Recovery #1": {
    imports: `import { createSelfHealing } from "selfheal";
import { slackNotifier } from "selfheal/notify";`,
    declarations: `
declare function pingAnthropic(signal: AbortSignal): Promise<void>;
interface ChatClient {
  chat(prompt: string, options: { signal: AbortSignal }): Promise<{ text: string; usage: { input: number; output: number } }>;
}
declare const clients: Record<string, ChatClient>;`,
  },
  "Streams: `sh.stream` #1": {},
  "Testing your agent: `selfheal/testing` #1": {},
  "Health signals #1": { imports: `import { createSelfHealing } from "selfheal";` },
  "`selfheal/otel`: an OpenTelemetry SDK in one call #1": {
    needs: ["@opentelemetry/sdk-trace-node", "@opentelemetry/sdk-metrics"],
  },
  "`selfheal/redis`: a fleet of workers on one Redis #1": { needs: ["ioredis"] },
  "Vercel AI SDK #1": {
    imports: `import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, stepCountIs, tool } from "ai";
import { z } from "zod";`,
    declarations: `
const openai = createOpenAICompatible({ name: "openai", baseURL: "https://api.openai.com/v1" });
const anthropic = createOpenAICompatible({ name: "anthropic", baseURL: "https://api.anthropic.com/v1" });
const searchDocs = tool({
  description: "Search the docs",
  inputSchema: z.object({ q: z.string() }),
  execute: async ({ q }) => ({ hits: [q] }),
});
const issueRefund = tool({
  description: "Refund an order",
  inputSchema: z.object({ orderId: z.string() }),
  execute: async ({ orderId }) => ({ refunded: orderId }),
});
declare const prompt: string;`,
  },
  "Vercel AI SDK #2": {
    imports: `import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { streamText } from "ai";
import { createSelfHealing } from "selfheal";
import { healModel, isRestartPart } from "selfheal/ai-sdk";`,
    declarations: `
const openai = createOpenAICompatible({ name: "openai", baseURL: "https://api.openai.com/v1" });
const anthropic = createOpenAICompatible({ name: "anthropic", baseURL: "https://api.anthropic.com/v1" });
const sh = createSelfHealing({ agent: "support-bot", recovery: { providers: [{ name: "openai" }, { name: "anthropic" }] } });
declare const prompt: string;`,
  },
  "LangChain #1": {
    imports: `import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { tool } from "langchain";
import { z } from "zod";`,
    declarations: `
declare const model: BaseChatModel;
const tools = [
  tool(async ({ q }) => "refunds take 5 days: " + q, {
    name: "search_docs",
    description: "Search the docs",
    schema: z.object({ q: z.string() }),
  }),
];`,
  },
  "MCP (Model Context Protocol TypeScript SDK) #1": {
    imports: `import type { Transport } from "@modelcontextprotocol/client";`,
    declarations: `declare const transport: Transport;`,
  },
  "MCP (Model Context Protocol TypeScript SDK) #2": {},
  "OpenAI Agents SDK #1": {
    imports: `import { z } from "zod";`,
    declarations: `
const description = "Search the docs";
const parameters = z.object({ q: z.string() });
const execute = async ({ q }: { q: string }) => "refunds take 5 days: " + q;
const issueRefund = tool({
  name: "issue_refund",
  description: "Refund an order",
  parameters: z.object({ orderId: z.string() }),
  errorFunction: null,
  execute: async ({ orderId }) => "refunded " + orderId,
});
const instructions = "Answer from the docs.";
const model = "gpt-4.1-mini";`,
  },
  "Long runs: `selfheal/watchdog` (heartbeats and verdicts) #1": {},
  "Long runs: `selfheal/watchdog` (heartbeats and verdicts) #2": {
    declarations: `
declare const agent: {
  remind(text: string | undefined): void;
  outputs: string[];
  replaceOutputs(outputs: string[]): void;
  state(): unknown;
};
declare function headAndTail(outputs: string[]): string[];
declare const stepIdx: number;
declare const notes: string;`,
  },
};

/** The package a bare import specifier names (`@scope/name/sub` -> `@scope/name`). */
export function packageOf(specifier: string): string {
  const parts = specifier.split("/");
  return (specifier.startsWith("@") ? parts.slice(0, 2) : parts.slice(0, 1)).join("/");
}

export interface Snippet {
  key: string;
  block: ReadmeBlock;
  /** The import lines: the prelude's, then the snippet's. */
  imports: string;
  declarations: string;
  body: string;
  /** Packages to install besides selfheal: what the imports name, and the prelude's `needs`. */
  packages: string[];
}

/** A snippet's import lines (each import in the README is one line) and the rest. */
function split(code: string, key: string): { imports: string[]; body: string[] } {
  const lines = code.split("\n");
  const imports = lines.filter((l) => l.startsWith("import "));
  for (const line of imports)
    if (!/ from "[^"]+";( \/\/.*)?$/.test(line) && !/^import "[^"]+";$/.test(line))
      throw new Error(`${key}: an import that is not one whole line: ${line}`);
  return { imports, body: lines.filter((l) => !l.startsWith("import ")) };
}

/** Every ts block of the README with its prelude (throws for a block without one). */
export function snippets(): Snippet[] {
  return readmeBlocks("ts").map((block) => {
    const key = `${block.heading} #${block.index}`;
    const prelude = PRELUDES[key];
    if (!prelude) throw new Error(`README block "${key}" has no entry in PRELUDES`);
    const own = split(block.code, key);
    const before = split(prelude.imports ?? "", key);
    const imports = [...before.imports, ...own.imports];
    const specifiers = imports.map((l) => /"([^"]+)"/.exec(l)?.[1] ?? "");
    const packages = new Set([
      ...specifiers.map(packageOf).filter((p) => p !== "selfheal"),
      ...(prelude.needs ?? []),
    ]);
    return {
      key,
      block,
      imports: imports.join("\n"),
      declarations: prelude.declarations ?? "",
      body: own.body.join("\n"),
      packages: [...packages].sort(),
    };
  });
}

/** The snippet as a file of a project of that kind: top-level await needs ESM, so CommonJS runs
 * the body in an async function (what a CommonJS user writes). */
export function snippetFile(snippet: Snippet, kind: "esm" | "cjs"): string {
  const head = `// README.md line ${snippet.block.line}: ${snippet.key}\n${snippet.imports}\n${snippet.declarations}\n`;
  return kind === "esm"
    ? `${head}\n${snippet.body}\nexport {};\n`
    : `${head}\nexport async function snippet(): Promise<void> {\n${snippet.body}\n}\n`;
}

export interface Round {
  index: number;
  /** `name@version` of every package installed (besides selfheal). */
  specs: string[];
  /** The packages whose version differs from round 0 (all of them in round 0). */
  changed: string[];
}

/** The install rounds of FRAMEWORKS (see there). */
export function rounds(): Round[] {
  const count = Math.max(...FRAMEWORKS.map((f) => f.versions.length));
  return Array.from({ length: count }, (_, index) => ({
    index,
    specs: FRAMEWORKS.map((f) => `${f.name}@${f.versions[index] ?? f.versions[0] ?? ""}`),
    changed: FRAMEWORKS.filter((f) => index === 0 || f.versions[index] !== undefined).map(
      (f) => f.name,
    ),
  }));
}
