import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    // The checkpoint validation suite calls describe/it/expect/beforeEach as globals.
    globals: true,
    include: ["test/**/*.spec.ts"],
    root: new URL("..", import.meta.url).pathname,
  },
});
