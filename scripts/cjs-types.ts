/**
 * The CommonJS view of dist/, run after `tsc -p tsconfig.build.json` (`npm run build`).
 *
 * selfheal's JavaScript is ESM only; CommonJS code loads it with require(esm) (Node >= 20.19 /
 * 22.12), which returns the module's namespace. Its `.d.ts` files are ESM declarations (the
 * package is `"type": "module"`), and TypeScript resolves the imports of an ESM declaration with
 * the `import` condition: from a CommonJS project, selfheal's signatures then name the ESM
 * declarations of a dual framework (`@modelcontextprotocol/client`, `langchain`) while the user's
 * own code gets the CommonJS ones, and the two do not match (issue 26: TS2345 "separate
 * declarations of a private property", TS2769).
 *
 * So every module `x.js` that has declarations gets, beside it:
 * - `x.cjs`: `module.exports = require("./x.js")`, a real CommonJS file whose exports are that
 *   namespace (for an entry this is what `exports[...].require` points at; the others are never
 *   loaded, they make each declaration below describe a file that exists, as TypeScript assumes);
 * - `x.d.cts`: the text of `x.d.ts` with its relative specifiers `./y.js` written `./y.cjs`, so it
 *   and every declaration it reaches are CommonJS to TypeScript, and their imports of frameworks
 *   resolve with the `require` condition, as the user's own imports do;
 * - `x.d.cts.map`: its declaration map (same sources).
 *
 * A named export of `x.d.ts` is a property of the namespace, which is what `x.d.cts` declares on
 * `module.exports`; a default export would be `exports.default`, the namespace's `default`
 * (Node marks such a namespace `__esModule`), so the text carries over unchanged.
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { basename, dirname, join, relative, resolve } from "node:path";
import ts from "typescript";

const DIST = resolve(import.meta.dirname, "../dist");

/** Every file under `dir`, recursively. */
function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? files(join(dir, entry.name)) : [join(dir, entry.name)],
  );
}

/** The string literals of a declaration file that name a module, with their positions. */
function moduleSpecifiers(source: ts.SourceFile): ts.StringLiteral[] {
  const found: ts.StringLiteral[] = [];
  const visit = (node: ts.Node): void => {
    if (
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
      node.moduleSpecifier !== undefined &&
      ts.isStringLiteral(node.moduleSpecifier)
    )
      found.push(node.moduleSpecifier);
    else if (
      ts.isImportEqualsDeclaration(node) &&
      ts.isExternalModuleReference(node.moduleReference) &&
      ts.isStringLiteral(node.moduleReference.expression)
    )
      found.push(node.moduleReference.expression);
    else if (
      ts.isImportTypeNode(node) &&
      ts.isLiteralTypeNode(node.argument) &&
      ts.isStringLiteral(node.argument.literal)
    )
      found.push(node.argument.literal);
    else if (ts.isModuleDeclaration(node) && ts.isStringLiteral(node.name)) found.push(node.name);
    else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] !== undefined &&
      ts.isStringLiteral(node.arguments[0])
    )
      found.push(node.arguments[0]);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** `x.d.ts` as `x.d.cts`: relative `./y.js` become `./y.cjs`, each checked to have declarations. */
function commonJsDeclarations(file: string, text: string): string {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  if (source.referencedFiles.length > 0)
    throw new Error(`${file}: /// <reference path> is not rewritten; use an import`);
  let out = text;
  // From the end, so earlier positions stay valid.
  const relatives = moduleSpecifiers(source)
    .filter((literal) => /^\.\.?\//.test(literal.text))
    .sort((a, b) => b.getStart(source) - a.getStart(source));
  for (const literal of relatives) {
    const specifier = literal.text;
    if (!specifier.endsWith(".js"))
      throw new Error(`${file}: relative specifier "${specifier}" does not end in .js`);
    const target = resolve(dirname(file), specifier.replace(/\.js$/, ".d.ts"));
    if (!existsSync(target))
      throw new Error(`${file}: "${specifier}" has no declarations (${relative(DIST, target)})`);
    const start = literal.getStart(source) + 1; // after the opening quote
    const end = literal.getEnd() - 1;
    out = `${out.slice(0, start)}${specifier.replace(/\.js$/, ".cjs")}${out.slice(end)}`;
  }
  const name = basename(file);
  return out.replace(
    `//# sourceMappingURL=${name}.map`,
    `//# sourceMappingURL=${name.replace(/\.d\.ts$/, ".d.cts")}.map`,
  );
}

const shim = (js: string) =>
  [
    '"use strict";',
    "// selfheal is ESM: this is require(esm) of the module beside it, whose namespace it exports.",
    `module.exports = require("./${js}");`,
    "",
  ].join("\n");

let count = 0;
for (const file of files(DIST).filter((f) => f.endsWith(".d.ts"))) {
  const js = file.replace(/\.d\.ts$/, ".js");
  if (!existsSync(js)) throw new Error(`${relative(DIST, file)} has no ${basename(js)}`);
  const dcts = file.replace(/\.d\.ts$/, ".d.cts");
  writeFileSync(dcts, commonJsDeclarations(file, readFileSync(file, "utf8")));
  writeFileSync(file.replace(/\.d\.ts$/, ".cjs"), shim(basename(js)));
  const map = `${file}.map`;
  if (existsSync(map)) {
    const json = JSON.parse(readFileSync(map, "utf8")) as { file?: string };
    json.file = basename(dcts);
    writeFileSync(`${dcts}.map`, JSON.stringify(json));
  }
  count++;
}
console.log(`cjs-types: ${count} modules given a .cjs and a .d.cts`);
