import { relative } from "node:path";
import ts from "typescript";

/**
 * Type-checks the project in `dir` (its tsconfig.json) and returns its errors as
 * `file(line,col): TSxxxx message`: those of the project's own files and of every declaration
 * file of selfheal it loads (`skipLibCheck` must be off for these). The frameworks' own
 * declarations are read as the checks need them but not checked through (their business, and
 * most of the time `tsc` would spend).
 */
export function typeCheck(dir: string): string[] {
  const file = ts.findConfigFile(dir, (f) => ts.sys.fileExists(f));
  if (file === undefined) throw new Error(`no tsconfig.json in ${dir}`);
  const read = ts.readConfigFile(file, (f) => ts.sys.readFile(f));
  if (read.error) throw new Error(ts.flattenDiagnosticMessageText(read.error.messageText, "\n"));
  const parsed = ts.parseJsonConfigFileContent(read.config, ts.sys, dir);
  if (parsed.options.skipLibCheck === true) throw new Error("skipLibCheck would hide selfheal's");
  const program = ts.createProgram({ rootNames: parsed.fileNames, options: parsed.options });
  // TypeScript writes file names with "/" on every platform.
  const checked = program
    .getSourceFiles()
    .filter(
      (f) =>
        !f.fileName.includes("/node_modules/") || f.fileName.includes("/node_modules/selfheal/"),
    );
  const diagnostics = [
    ...parsed.errors,
    ...program.getOptionsDiagnostics(),
    ...program.getGlobalDiagnostics(),
    ...checked.flatMap((f) => [
      ...program.getSyntacticDiagnostics(f),
      ...program.getSemanticDiagnostics(f),
    ]),
  ];
  return diagnostics.map((d) => {
    const text = ts.flattenDiagnosticMessageText(d.messageText, "\n");
    if (d.file === undefined || d.start === undefined) return `TS${d.code} ${text}`;
    const { line, character } = d.file.getLineAndCharacterOfPosition(d.start);
    const name = relative(dir, d.file.fileName);
    return `${name}(${line + 1},${character + 1}): TS${d.code} ${text}`;
  });
}
