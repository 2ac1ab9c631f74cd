import { test } from "tap";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import path from "node:path";

const root = path.resolve(import.meta.dirname, "..");

/**
 * The layering of DESIGN.md §2, drawn from the imports by dependency-cruiser with the rules of
 * .dependency-cruiser.cjs: no file imports a higher layer, an edge never imports another edge,
 * the ground floor imports no layer, and there is no import cycle.
 */
test("imports point down the layers, with no cycle", async (t) => {
  const bin = path.join(root, "node_modules", ".bin", "depcruise");
  const { stdout } = await promisify(execFile)(bin, ["src", "projections", "--config", ".dependency-cruiser.cjs", "--output-type", "json"], {
    cwd: root, maxBuffer: 64 * 1024 * 1024,
  }).catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? "" }));
  const result = JSON.parse(stdout) as { summary: { violations: { rule: { name: string }; from: string; to: string }[]; totalCruised: number } };
  t.ok(result.summary.totalCruised > 150, `every module was cruised (${result.summary.totalCruised})`);
  t.same(result.summary.violations.map((v) => `${v.rule.name}: ${v.from} -> ${v.to}`), [], "no layer violation");
});
