/**
 * The documentation's TypeScript snippets as the package test type-checks them: every ```ts (or
 * ```typescript) block of README.md, CONTRIBUTING.md and every page under docs/, which frameworks
 * (and which versions) they are checked against, what each leaves to the reader, and as which kind of
 * module (ESM, CommonJS) each is checked.
 */
import ts from "typescript";
import { doc, docFiles, type DocBlock } from "../helpers/readme.js";

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
  { name: "@mastra/core", versions: ["1.71.0"] },
  // The provider SDKs healed in one line: each major of their peer ranges that this repository
  // tests (@anthropic-ai/sdk has one).
  { name: "openai", versions: ["7.60.0", "6.49.0"] },
  { name: "@anthropic-ai/sdk", versions: ["1.17.0"] },
  { name: "@google/genai", versions: ["3.6.1", "2.32.0"] },
  { name: "zod", versions: ["4.6.7"] },
  { name: "ioredis", versions: ["6.0.0"] },
  // selfheal/otel's declarations name types of these two optional peers.
  { name: "@opentelemetry/sdk-trace-node", versions: ["2.12.0"] },
  { name: "@opentelemetry/sdk-metrics", versions: ["2.12.0"] },
];

/**
 * What a snippet leaves to the reader (your model, your tools, a URL), declared for it before its
 * own code: `declarations`, whose imports may only be namespace imports named `__...`
 * (`import * as __ai from "ai";`), so that they never stand in for an import the snippet lacks:
 * a snippet carries every import it uses. `needs`: packages the snippet does not import but
 * whose types selfheal's declarations name (installed with it).
 */
export interface Prelude {
  declarations?: string;
  needs?: readonly string[];
  /** Why the snippet is checked with round 0's versions only (a framework's own types refuse
   * a later round's, with or without selfheal). */
  firstRoundOnly?: string;
}

/**
 * By snippet key, `page: heading #n` (the n-th ts block under that heading): what each leaves to
 * the reader. A block without an entry needs nothing; an entry must name a block.
 */
export const PRELUDES: Readonly<Record<string, Prelude>> = {
  "README.md: Quick start #2": {
    declarations: `
declare const DOCS_URL: string;
declare const payments: {
  refund(id: string, options: { idempotencyKey: string | undefined }): Promise<{ id: string }>;
};`,
  },
  "README.md: 2. Start it before the agent #1": {
    needs: ["@opentelemetry/sdk-trace-node", "@opentelemetry/sdk-metrics"],
  },
  "docs/recovery.md: Plans, providers, an example #1": {
    declarations: `
declare function pingAnthropic(signal: AbortSignal): Promise<void>;
interface ChatClient {
  chat(prompt: string, options: { signal: AbortSignal }): Promise<{ text: string; usage: { input: number; output: number } }>;
}
declare const clients: Record<string, ChatClient>;`,
  },
  "docs/fleet.md: Setup #1": { needs: ["ioredis"] },
  "docs/watchdog.md: The agent's side #1": {
    declarations: `
declare const agent: {
  remind(text: string): void;
  outputs: string[];
  replaceOutputs(outputs: string[]): void;
  state(): unknown;
};
declare const stepIdx: number;
declare const notes: string;`,
  },
  "docs/adapters/ai-sdk.md: Setup #1": {
    declarations: `
import * as __compat from "@ai-sdk/openai-compatible";
import * as __ai from "ai";
import * as __zod from "zod";
const openai = __compat.createOpenAICompatible({ name: "openai", baseURL: "https://api.openai.com/v1" });
const anthropic = __compat.createOpenAICompatible({ name: "anthropic", baseURL: "https://api.anthropic.com/v1" });
const searchDocs = __ai.tool({
  description: "Search the docs",
  inputSchema: __zod.z.object({ q: __zod.z.string() }),
  execute: async ({ q }) => ({ hits: [q] }),
});
const issueRefund = __ai.tool({
  description: "Refund an order",
  inputSchema: __zod.z.object({ orderId: __zod.z.string() }),
  execute: async ({ orderId }) => ({ refunded: orderId }),
});
declare const prompt: string;`,
  },
  "docs/adapters/ai-sdk.md: Streaming with `streamText` #1": {
    declarations: `
import * as __compat from "@ai-sdk/openai-compatible";
const openai = __compat.createOpenAICompatible({ name: "openai", baseURL: "https://api.openai.com/v1" });
const anthropic = __compat.createOpenAICompatible({ name: "anthropic", baseURL: "https://api.anthropic.com/v1" });
declare const prompt: string;`,
  },
  "docs/adapters/langchain.md: Setup #1": {
    declarations: `
import type * as __chat from "@langchain/core/language_models/chat_models";
import * as __langchain from "langchain";
import * as __zod from "zod";
declare const model: __chat.BaseChatModel;
const tools = [
  __langchain.tool(async ({ q }) => "refunds take 5 days: " + q, {
    name: "search_docs",
    description: "Search the docs",
    schema: __zod.z.object({ q: __zod.z.string() }),
  }),
];`,
  },
  "docs/adapters/mcp.md: Setup #1": {
    declarations: `
import type * as __mcp from "@modelcontextprotocol/client";
declare const transport: __mcp.Transport;`,
  },
  "docs/adapters/mastra.md: Setup #1": {
    declarations: `
import * as __compat from "@ai-sdk/openai-compatible";
import * as __tools from "@mastra/core/tools";
import * as __zod from "zod";
const openai = __compat.createOpenAICompatible({ name: "openai", baseURL: "https://api.openai.com/v1" });
const anthropic = __compat.createOpenAICompatible({ name: "anthropic", baseURL: "https://api.anthropic.com/v1" });
const issueRefund = __tools.createTool({
  id: "issue-refund",
  description: "Refund an order",
  inputSchema: __zod.z.object({ orderId: __zod.z.string() }),
  execute: async ({ orderId }) => ({ refunded: orderId }),
});`,
    firstRoundOnly:
      "Mastra 1.71's declarations bundle @ai-sdk/provider 4.0.17: its Agent refuses the type of an @ai-sdk/openai-compatible 3 model (TS2322) even without selfheal",
  },
  "docs/adapters/openai-agents.md: Setup #1": {
    declarations: `
import * as __agents from "@openai/agents";
import * as __zod from "zod";
const description = "Search the docs";
const parameters = __zod.z.object({ q: __zod.z.string() });
const execute = async ({ q }: { q: string }) => "refunds take 5 days: " + q;
const issueRefund = __agents.tool({
  name: "issue_refund",
  description: "Refund an order",
  parameters: __zod.z.object({ orderId: __zod.z.string() }),
  errorFunction: null,
  execute: async ({ orderId }) => "refunded " + orderId,
});
const instructions = "Answer from the docs.";
const model = "gpt-4.1-mini";`,
  },
};

/** The package a bare import specifier names (`@scope/name/sub` -> `@scope/name`). */
export function packageOf(specifier: string): string {
  const parts = specifier.split("/");
  return (specifier.startsWith("@") ? parts.slice(0, 2) : parts.slice(0, 1)).join("/");
}

/**
 * How a snippet is checked in the CommonJS project: `as-written` (no top-level await: the file as
 * it is), or `wrapped` (its body in an async function, what a CommonJS user writes around
 * top-level await, which CommonJS has not: selfheal's .d.cts types still meet the frameworks'
 * CommonJS types). Every snippet is checked as CommonJS; all but `// CommonJS` ones as ESM too.
 */
export type CommonJsCheck = "as-written" | "wrapped";

export interface Snippet {
  /** `page: heading #n`. */
  key: string;
  block: DocBlock;
  /** The snippet's own import lines, then its prelude's (namespace imports only). */
  imports: string;
  declarations: string;
  body: string;
  /** Packages to install besides selfheal: what the imports name, and the prelude's `needs`. */
  packages: string[];
  /** Checked in round 0 only (see Prelude). */
  firstRoundOnly: boolean;
  /** Its first line is `// CommonJS`: checked as CommonJS only, as written. */
  commonJs: boolean;
  /** It awaits at the top level (an ES module feature). */
  topLevelAwait: boolean;
  /** Checked in the ESM project (every snippet but a `// CommonJS` one). */
  esm: boolean;
  /** How it is checked in the CommonJS project. */
  cjs: CommonJsCheck;
}

/** A snippet's import lines (each import in the docs is one line) and the rest. */
function split(code: string, key: string): { imports: string[]; body: string[] } {
  const lines = code.split("\n");
  const imports = lines.filter((l) => l.startsWith("import "));
  for (const line of imports)
    if (!/ from "[^"]+";( \/\/.*)?$/.test(line) && !/^import "[^"]+";$/.test(line))
      throw new Error(`${key}: an import that is not one whole line: ${line}`);
  return { imports, body: lines.filter((l) => !l.startsWith("import ")) };
}

/** Whether `code` awaits outside every function (`await x`, `for await`). */
export function hasTopLevelAwait(code: string): boolean {
  const file = ts.createSourceFile("snippet.ts", code, ts.ScriptTarget.Latest, true);
  const visit = (node: ts.Node): boolean => {
    if (ts.isFunctionLike(node) || ts.isClassStaticBlockDeclaration(node)) return false;
    if (ts.isAwaitExpression(node)) return true;
    if (ts.isForOfStatement(node) && node.awaitModifier !== undefined) return true;
    return ts.forEachChild(node, visit) === true;
  };
  return ts.forEachChild(file, visit) === true;
}

/** Every ts block of the documentation's pages, in page order. */
export function docBlocks(): DocBlock[] {
  return docFiles().flatMap((page) => doc(page).blocks("ts", "typescript"));
}

/** Every ts block of the documentation with its prelude (throws on a prelude that breaks a rule). */
export function snippets(): Snippet[] {
  return docBlocks().map((block) => {
    const key = `${block.file}: ${block.heading} #${block.index}`;
    const prelude = PRELUDES[key] ?? {};
    const own = split(block.code, key);
    const before = split(prelude.declarations ?? "", `prelude of ${key}`);
    for (const line of before.imports)
      if (!/^import (type )?\* as __\w+ from "[^"]+";$/.test(line))
        throw new Error(`prelude of ${key}: only "import * as __name" imports: ${line}`);
    const imports = [...own.imports, ...before.imports];
    const specifiers = imports.map((l) => /"([^"]+)"/.exec(l)?.[1] ?? "");
    const packages = new Set([
      ...specifiers.map(packageOf).filter((p) => p !== "selfheal" && !p.startsWith("node:")),
      ...(prelude.needs ?? []),
    ]);
    const commonJs = block.code.trimStart().startsWith("// CommonJS");
    const topLevelAwait = hasTopLevelAwait(block.code);
    if (commonJs && topLevelAwait)
      throw new Error(`${key}: a // CommonJS block cannot await at the top level`);
    return {
      key,
      block,
      imports: imports.join("\n"),
      declarations: before.body.join("\n"),
      body: own.body.join("\n"),
      packages: [...packages].sort(),
      firstRoundOnly: prelude.firstRoundOnly !== undefined,
      commonJs,
      topLevelAwait,
      esm: !commonJs,
      cjs: topLevelAwait ? "wrapped" : "as-written",
    };
  });
}

/** The file name of a snippet in a scratch project (`docs/recovery.md` line 80: docs-recovery-80). */
export function snippetFileName(snippet: Snippet): string {
  return `${snippet.block.file.replace(/\.md$/, "").replace(/[^A-Za-z0-9]+/g, "-")}-${snippet.block.line}.ts`;
}

/** The snippet as a file of a project of that kind: as written, or (CommonJS with top-level
 * await) its body in an async function. */
export function snippetFile(snippet: Snippet, kind: "esm" | "cjs"): string {
  const { file, line, heading, index } = snippet.block;
  const head = `// ${file} line ${line}: ${heading} #${index}\n${snippet.imports}\n${snippet.declarations}\n`;
  return kind === "cjs" && snippet.cjs === "wrapped"
    ? `${head}\nexport async function snippet(): Promise<void> {\n${snippet.body}\n}\n`
    : `${head}\n${snippet.body}\nexport {};\n`;
}

/** The snippets checked in a project of `kind`. */
export function checkedAs(all: readonly Snippet[], kind: "esm" | "cjs"): Snippet[] {
  return all.filter((s) => (kind === "esm" ? s.esm : true));
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
