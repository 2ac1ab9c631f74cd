// The layers of docs/architecture.md, drawn from the imports (`npx depcruise src projections`; test/repo/architecture.test.ts).
// Each layer may import only layers below it: eventstore → domain → projections → read-models →
// commands → runtime → webhooks → app → edges (http, a2a, mcp, protocol) → assembly (server.ts, main.ts and the
// start-up parts of src/startup/), with the ground floor (src/context, src/util, src/crypto, config,
// langgraph-config, module-loader, version) under all of them.
// An edge never imports another edge.
const GROUND = "^src/(context/|util/|crypto/|config\\.ts|langgraph-config\\.ts|module-loader\\.ts|version\\.ts)";
const EDGES = ["http", "a2a", "mcp", "protocol"];
const ANY_EDGE = `^src/(${EDGES.join("|")})/`;
const ASSEMBLY = "^src/((server|main)\\.ts$|startup/)";
const layers = [
  ["eventstore", "^src/eventstore/"],
  ["domain", "^src/domain/"],
  ["projections", "^projections/"],
  ["read-models", "^src/read-models/"],
  ["commands", "^src/commands/"],
  ["runtime", "^src/runtime/"],
  ["webhooks", "^src/webhooks/"],
  ["app", "^src/app/"],
];
const above = (i) =>
  layers
    .slice(i + 1)
    .map(([, path]) => path)
    .concat([ANY_EDGE, ASSEMBLY]);
module.exports = {
  forbidden: [
    { name: "no-cycles", severity: "error", from: {}, to: { circular: true } },
    { name: "ground-floor-imports-no-layer", severity: "error", from: { path: GROUND }, to: { path: "^(src|projections)/", pathNot: GROUND } },
    ...layers.map(([name, path], i) => ({ name: `${name}-imports-only-below`, severity: "error", from: { path }, to: { path: above(i) } })),
    ...EDGES.map((edge) => ({
      name: `${edge}-imports-no-other-edge`,
      severity: "error",
      from: { path: `^src/${edge}/` },
      to: { path: `^src/(${EDGES.filter((e) => e !== edge).join("|")})/` },
    })),
    { name: "edges-import-no-assembly", severity: "error", from: { path: ANY_EDGE }, to: { path: ASSEMBLY } },
  ],
  options: { tsPreCompilationDeps: true, doNotFollow: { path: "node_modules" }, exclude: { path: "(^|/)node_modules/" } },
};
