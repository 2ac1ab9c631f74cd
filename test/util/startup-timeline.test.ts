import t from "tap";
import { StartupTimeline } from "../../src/util/startup-timeline.js";

t.test("each phase lasts from the previous mark (the first from the process start)", async (t) => {
  const clock = [120, 150, 150, 400];
  const timeline = new StartupTimeline(() => clock.shift()!);
  for (const phase of ["modules", "config", "empty", "store"]) timeline.mark(phase);
  t.same(timeline.phases(), [
    { phase: "modules", ms: 120, atMs: 120 },
    { phase: "config", ms: 30, atMs: 150 },
    { phase: "empty", ms: 0, atMs: 150 },
    { phase: "store", ms: 250, atMs: 400 },
  ]);
});

t.test("no marks, no phases", async (t) => {
  t.same(new StartupTimeline(() => 1).phases(), []);
});
