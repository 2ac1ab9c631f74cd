#!/usr/bin/env node
// The `agent-server` command of the package: the CLI is built into dist/ (npm pack runs the build).
import { existsSync } from "node:fs";

const cli = new URL("../dist/cli.js", import.meta.url);
if (!existsSync(cli)) {
  console.error("agent-server: dist/cli.js is missing; in a clone of the repository run `npm run build` first");
  process.exit(1);
}
await import(cli.href);
