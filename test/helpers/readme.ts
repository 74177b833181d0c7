/**
 * The repository's Markdown documentation as the tests read it: README.md, CONTRIBUTING.md and
 * every page under docs/. `doc(path)` reads one page (a path from the repository root); its
 * sections, tables and fenced blocks are found as on GitHub (headings inside fences ignored).
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";

export const ROOT = resolve(import.meta.dirname, "../..");

/** Every documentation page, as paths from the repository root ("/" separators), sorted. */
export function docFiles(): string[] {
  const pages = ["README.md", "CONTRIBUTING.md"].filter((f) => existsSync(join(ROOT, f)));
  const walk = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true })
      .flatMap((e) => (e.isDirectory() ? walk(join(dir, e.name)) : [join(dir, e.name)]))
      .filter((f) => f.endsWith(".md"));
  const docs = existsSync(join(ROOT, "docs")) ? walk(join(ROOT, "docs")) : [];
  return [...pages, ...docs.map((f) => relative(ROOT, f).replace(/\\/g, "/")).sort()];
}

export interface DocBlock {
  /** The page, from the repository root (`docs/recovery.md`). */
  file: string;
  /** The heading (any level from 1 to 4) the block sits under ("" before the first). */
  heading: string;
  /** 1 for the first block of this language under that heading, 2 for the next... */
  index: number;
  /** The 1-based line of its opening fence. */
  line: number;
  /** The language of its fence (`ts`, `typescript`, `sh`...). */
  language: string;
  code: string;
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens. */
export function slug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/`/g, "")
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

export interface Doc {
  file: string;
  text: string;
  lines: string[];
  /** The text of the section under `heading` (any level), to the next heading of any level. */
  section(heading: string): string;
  /** The first ```ts block of a section. */
  block(heading: string): string;
  /** The rows of the first table whose header's first cell is `firstColumn`, as cell lists. */
  table(firstColumn: string): string[][];
  /** Every fenced block whose language is one of `languages`, in order. */
  blocks(...languages: string[]): DocBlock[];
  /** Every heading outside fences, in order. */
  headings(): string[];
  /** The anchors GitHub gives those headings (a repeated one gets -1, -2...). */
  anchors(): Set<string>;
}

const cache = new Map<string, Doc>();

/** One page, by its path from the repository root. */
export function doc(file: string): Doc {
  const cached = cache.get(file);
  if (cached) return cached;
  const text = readFileSync(join(ROOT, file), "utf8");
  const lines = text.split("\n");

  /** Each line's heading (level and text), or undefined; lines inside fences are none. */
  const outline: ({ level: number; text: string } | undefined)[] = [];
  for (let i = 0, fence = false; i < lines.length; i++) {
    const line = lines[i] ?? "";
    if (line.startsWith("```")) fence = !fence;
    const m = fence ? null : /^(#{1,6}) (.+)$/.exec(line);
    outline.push(m ? { level: m[1]?.length ?? 0, text: m[2] ?? "" } : undefined);
  }

  const page: Doc = {
    file,
    text,
    lines,
    section(heading) {
      const start = outline.findIndex((h) => h?.text === heading);
      if (start < 0) throw new Error(`${file} has no heading "${heading}"`);
      const end = outline.findIndex((h, i) => i > start && h !== undefined);
      return lines.slice(start + 1, end < 0 ? undefined : end).join("\n");
    },
    block(heading) {
      const match = /```ts\n([\s\S]*?)```/.exec(page.section(heading));
      if (!match?.[1]) throw new Error(`${file} section "${heading}" has no ts block`);
      return match[1];
    },
    table(firstColumn) {
      const header = lines.findIndex((l) => new RegExp(`^\\|\\s*${firstColumn}\\s*\\|`).test(l));
      if (header < 0) throw new Error(`${file} has no table starting with "${firstColumn}"`);
      const rows: string[][] = [];
      for (let i = header + 2; i < lines.length && lines[i]?.startsWith("|"); i++) {
        rows.push(
          (lines[i] ?? "")
            .split(/(?<!\\)\|/)
            .slice(1, -1)
            .map((c) => c.replace(/\\\|/g, "|").trim()),
        );
      }
      return rows;
    },
    blocks(...languages) {
      const blocks: DocBlock[] = [];
      let heading = "";
      const count = new Map<string, number>();
      for (let i = 0; i < lines.length; i++) {
        const line = lines[i] ?? "";
        const h = outline[i];
        if (h && h.level <= 4) {
          heading = h.text;
          count.clear();
        } else if (line.startsWith("```")) {
          const end = lines.findIndex((l, j) => j > i && l.startsWith("```"));
          if (end < 0) throw new Error(`${file} line ${i + 1}: a fence that is never closed`);
          const language = line.slice(3).trim();
          if (languages.includes(language)) {
            const index = (count.get("all") ?? 0) + 1;
            count.set("all", index);
            blocks.push({
              file,
              heading,
              index,
              line: i + 1,
              language,
              code: lines.slice(i + 1, end).join("\n"),
            });
          }
          i = end;
        }
      }
      return blocks;
    },
    headings() {
      return outline.flatMap((h) => (h ? [h.text] : []));
    },
    anchors() {
      const seen = new Map<string, number>();
      const anchors = new Set<string>();
      for (const heading of page.headings()) {
        const base = slug(heading);
        const n = seen.get(base) ?? 0;
        seen.set(base, n + 1);
        anchors.add(n === 0 ? base : `${base}-${n}`);
      }
      return anchors;
    },
  };
  cache.set(file, page);
  return page;
}

/** The README, as before: its text and the helpers over it. */
export const README = doc("README.md").text;
export const readmeSection = (heading: string): string => doc("README.md").section(heading);
export const readmeBlock = (heading: string): string => doc("README.md").block(heading);
export const readmeTable = (firstColumn: string): string[][] => doc("README.md").table(firstColumn);
