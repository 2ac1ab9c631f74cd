import t from "tap";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { parse } from "yaml";
import { repoRoot } from "../support/server.js";

/**
 * The GitHub Actions workflow (.github/workflows/ci.yml) cannot run here: this checks what can be
 * checked without it. Both jobs exist (the full suite through .ci/run on Node 20; the store contract
 * against a KurrentDB service container), the service is the image and settings docker-compose.yml
 * runs, EVENTSTORE_URL names that service's port, and every script, file and binary its commands
 * name exists, so a rename here cannot leave CI running nothing.
 */

interface Step {
  name?: string;
  uses?: string;
  run?: string;
  with?: Record<string, unknown>;
  env?: Record<string, unknown>;
}
interface Service {
  image?: string;
  env?: Record<string, unknown>;
  ports?: unknown[];
  options?: string;
}
interface Job {
  name?: string;
  "runs-on"?: string;
  container?: string | { image?: string; options?: string };
  services?: Record<string, Service>;
  env?: Record<string, unknown>;
  steps?: Step[];
}
interface Workflow {
  on?: unknown;
  jobs?: Record<string, Job>;
}

const workflowFile = path.join(repoRoot, ".github", "workflows", "ci.yml");
const workflow = parse(await readFile(workflowFile, "utf8")) as Workflow;
const compose = parse(await readFile(path.join(repoRoot, "docker-compose.yml"), "utf8")) as {
  services: Record<string, { image?: string; environment?: Record<string, unknown> }>;
};
const pkg = JSON.parse(await readFile(path.join(repoRoot, "package.json"), "utf8")) as { scripts: Record<string, string> };

const jobs = workflow.jobs ?? {};
const fullSuite = jobs["full-suite"];
const kurrentdb = jobs["kurrentdb"];
const steps = (job: Job | undefined) => job?.steps ?? [];
const runs = (job: Job | undefined) => steps(job).flatMap((s) => (typeof s.run === "string" ? [s.run] : []));
const allRuns = Object.values(jobs).flatMap(runs);
/** Every shell command line of the workflow, continuation lines joined. */
const commandLines = allRuns.flatMap((r) =>
  r
    .replace(/\\\n/g, " ")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("#")),
);
const strings = (env: Record<string, unknown> | undefined) => Object.fromEntries(Object.entries(env ?? {}).map(([k, v]) => [k, String(v)]));
const usesNode20 = (job: Job) => {
  const image = typeof job.container === "string" ? job.container : job.container?.image;
  if (image && /^node:20(\b|-|\.)/.test(image)) return true;
  return steps(job).some((s) => s.uses?.startsWith("actions/setup-node@") && String(s.with?.["node-version"]).split(".")[0] === "20");
};

t.test("the workflow runs on pushes and pull requests, with both jobs", async (t) => {
  t.ok(workflow.on, "it has triggers");
  const on = workflow.on as Record<string, unknown> | string[] | string;
  const triggers = typeof on === "string" ? [on] : Array.isArray(on) ? on : Object.keys(on);
  t.ok(triggers.includes("push") && triggers.includes("pull_request"), `push and pull_request: ${triggers.join(", ")}`);
  t.ok(fullSuite, "job full-suite");
  t.ok(kurrentdb, "job kurrentdb");
});

t.test("full-suite: bash .ci/run on ubuntu-latest with Node 20", async (t) => {
  t.equal(fullSuite?.["runs-on"], "ubuntu-latest");
  t.ok(fullSuite && usesNode20(fullSuite), "Node 20 (a node:20 container or actions/setup-node 20)");
  t.ok(
    steps(fullSuite).some((s) => s.uses?.startsWith("actions/checkout@")),
    "checks the repository out",
  );
  t.ok(
    runs(fullSuite).some((r) => /^bash \.ci\/run$/m.test(r)),
    "runs bash .ci/run",
  );
  t.notOk(fullSuite?.env?.EVENTSTORE_URL, "the full suite runs on the test double (no EVENTSTORE_URL)");
});

t.test("kurrentdb: the KurrentDB service of docker-compose.yml, healthy, on port 2113", async (t) => {
  const composeStore = Object.values(compose.services).find((s) => s.image?.startsWith("kurrentplatform/kurrentdb:"));
  t.ok(composeStore, "docker-compose.yml runs KurrentDB");
  t.equal(kurrentdb?.["runs-on"], "ubuntu-latest");
  t.ok(kurrentdb && usesNode20(kurrentdb), "Node 20");
  const services = Object.values(kurrentdb?.services ?? {});
  const service = services.find((s) => s.image?.startsWith("kurrentplatform/kurrentdb:"));
  t.ok(service, "a KurrentDB service container");
  t.equal(service?.image, composeStore?.image, "the same image and tag as docker-compose.yml");
  t.same(strings(service?.env), strings(composeStore?.environment), "the same (insecure, single-node) settings as docker-compose.yml");
  t.equal(strings(service?.env).KURRENTDB_INSECURE, "true", "insecure: no TLS, so tls=false below");
  t.ok((service?.ports ?? []).map(String).includes("2113:2113"), "port 2113 published as 2113");
  t.match(service?.options ?? "", /--health-cmd\b.*\/health\/live/, "a health check, so the steps start once the node is up");
  const commands = runs(kurrentdb);
  t.ok(
    commands.some((r) => /^npm ci\b/m.test(r)),
    "npm ci",
  );
  t.ok(
    commands.some((r) => /^npx tap\b.*\S+\.test\.ts/m.test(r)),
    "npx tap <files>",
  );
});

t.test("kurrentdb: EVENTSTORE_URL names the service's port, and the tap files it runs read it", async (t) => {
  const tapSteps = steps(kurrentdb).filter((s) => typeof s.run === "string" && /^npx tap\b/m.test(s.run));
  t.ok(tapSteps.length > 0, "a tap step");
  const service = Object.values(kurrentdb?.services ?? {})[0];
  const hostPort = String((service?.ports ?? [])[0] ?? "").split(":")[0];
  for (const step of tapSteps) {
    const url = strings({ ...kurrentdb?.env, ...step.env }).EVENTSTORE_URL;
    t.ok(url, `${step.name}: EVENTSTORE_URL is set`);
    const parsed = new URL(url);
    t.equal(parsed.protocol, "esdb:");
    t.ok(["localhost", "127.0.0.1"].includes(parsed.hostname), `the service on the runner: ${parsed.hostname}`);
    t.equal(parsed.port, hostPort, "the service's published port");
    t.equal(parsed.searchParams.get("tls"), "false", "tls=false, as the node is insecure");
    t.match(step.run!, /--fail-skip/, "a skipped real-node run fails the job instead of passing unnoticed");
    const files = [...step.run!.matchAll(/\btest\/\S+\.test\.ts\b/g)].map((m) => m[0]);
    t.ok(files.length > 0, "it names its test files");
    for (const file of files) {
      const text = await readFile(path.join(repoRoot, file), "utf8");
      t.match(text, "process.env.EVENTSTORE_URL", `${file} reads EVENTSTORE_URL (else it would not use the real node)`);
    }
  }
});

t.test("every npm script, file and binary the workflow's commands name exists", async (t) => {
  t.ok(commandLines.length > 0, "it has commands");
  for (const line of commandLines) {
    for (const [, script] of line.matchAll(/\bnpm run(?:-script)? (?:--\S+ )*([\w:.-]+)/g))
      t.ok(Object.hasOwn(pkg.scripts, script), `npm run ${script}: in package.json`);
    if (/\bnpm (test|t)\b/.test(line)) t.ok(Object.hasOwn(pkg.scripts, "test"), "npm test: in package.json");
    for (const [, file] of line.matchAll(/\bbash ([^\s-][^\s;&|]*)/g)) t.ok(existsSync(path.join(repoRoot, file)), `bash ${file}: exists`);
    for (const [, bin] of line.matchAll(/\bnpx (?:--\S+ )*([\w@/.-]+)/g))
      t.ok(existsSync(path.join(repoRoot, "node_modules", ".bin", bin)), `npx ${bin}: a binary of the devDependencies`);
    for (const [file] of line.matchAll(/(?<![\w/.])(?:test|\.ci|bench|src|bin)\/[\w./-]+\.(?:ts|mts|mjs|js|sh)\b/g))
      t.ok(existsSync(path.join(repoRoot, file)), `${file}: exists`);
  }
  // The parse itself: a typo'd path is not silently skipped by the patterns above.
  t.ok(
    commandLines.some((l) => l.includes("test/eventstore/esdb.test.ts")),
    "the contract file is among the names checked",
  );
});
