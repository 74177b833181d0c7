import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  {
    ignores: [
      "dist/",
      "node_modules/",
      "coverage/",
      "reports/",
      ".stryker-tmp/",
      // Plain JS outside tsconfig: the type-aware project service cannot parse it.
      "stryker.config.mjs",
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      "@typescript-eslint/restrict-template-expressions": ["error", { allowNumber: true }],
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_" }],
      // What a tool threw is passed on unchanged (same object, even a string): selfheal loses nothing.
      "@typescript-eslint/prefer-promise-reject-errors": "off",
    },
  },
  {
    // Plain JS the benchmarks and the package test run in a scratch project (outside tsconfig):
    // linted without types.
    files: ["eslint.config.js", "bench/**/*.mjs", "test/package/clients/*.mjs"],
    extends: [tseslint.configs.disableTypeChecked],
  },
);
