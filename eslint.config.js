// ESLint (flat config): the recommended JavaScript and typescript-eslint rules over the sources, the
// tests, the benchmarks and the scripts; formatting is Prettier's job (npm run format).
import js from "@eslint/js";
import globals from "globals";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/", "coverage/", "node_modules/", ".agent-server/", "data/", ".scratch/", ".test-results/"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: globals.node,
    },
    rules: {
      // Unused names are allowed when they say so: a leading underscore.
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_", caughtErrors: "none" }],
      // A `let` that a closure reads before its one assignment stays a `let` (as a `const` the closure could hit its TDZ).
      "prefer-const": ["error", { ignoreReadBeforeAssign: true }],
    },
  },
  {
    // CommonJS files (the benchmarks' --require probes, the dependency-cruiser config): require() is how they load modules.
    files: ["**/*.cjs"],
    languageOptions: { sourceType: "commonjs", globals: globals.node },
    rules: { "@typescript-eslint/no-require-imports": "off" },
  },
);
