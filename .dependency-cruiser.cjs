// The layers of DESIGN.md §2, drawn from the imports (`npx depcruise src projections`; test/architecture.test.ts).
// Each layer may import only layers below it: eventstore → domain → projections → read-models →
// runtime → webhooks → app → edges (http, a2a) → server.ts/main.ts, with the ground floor
// (src/context, src/util, config, langgraph-config, module-loader, version) under all of them.
const GROUND = "^src/(context/|util/|config\\.ts|langgraph-config\\.ts|module-loader\\.ts|version\\.ts)";
const layers = [
  ["eventstore", "^src/eventstore/"],
  ["domain", "^src/domain/"],
  ["projections", "^projections/"],
  ["read-models", "^src/read-models/"],
  ["runtime", "^src/runtime/"],
  ["webhooks", "^src/webhooks/"],
  ["app", "^src/app/"],
];
const above = (i) => layers.slice(i + 1).map(([, path]) => path).concat(["^src/(http|a2a|protocol)/", "^src/(server|main)\\.ts$"]);
module.exports = {
  forbidden: [
    { name: "no-cycles", severity: "error", from: {}, to: { circular: true } },
    { name: "ground-floor-imports-no-layer", severity: "error", from: { path: GROUND }, to: { path: "^(src|projections)/", pathNot: GROUND } },
    ...layers.map(([name, path], i) => ({ name: `${name}-imports-only-below`, severity: "error", from: { path }, to: { path: above(i) } })),
    { name: "an-edge-never-imports-another-edge", severity: "error", from: { path: "^src/http/" }, to: { path: "^src/(a2a|protocol)/" } },
    { name: "an-edge-never-imports-another-edge-a2a", severity: "error", from: { path: "^src/a2a/" }, to: { path: "^src/(http|protocol)/" } },
    { name: "an-edge-never-imports-another-edge-protocol", severity: "error", from: { path: "^src/protocol/" }, to: { path: "^src/(http|a2a)/" } },
    { name: "edges-import-no-assembly", severity: "error", from: { path: "^src/(http|a2a|protocol)/" }, to: { path: "^src/(server|main)\\.ts$" } },
  ],
  options: { tsPreCompilationDeps: true, doNotFollow: { path: "node_modules" }, exclude: { path: "(^|/)node_modules/" } },
};
