import t from "tap";
import { startTestServer } from "../support/server.js";

/** `/ok` on the embedded store: 200 while all is well, `check_db=1` a real round trip to the log, 503 + reason when it fails. */

t.test("/ok and /ok?check_db=1 on SQLite", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close().catch(() => undefined));
  for (const query of ["", "?check_db=0", "?check_db=1", "?check_db=true"]) {
    const res = await fetch(`${srv.url}/ok${query}`);
    t.equal(res.status, 200, `/ok${query}`);
    t.same(await res.json(), { ok: true });
  }
  const info = (await (await fetch(`${srv.url}/info`)).json()) as { log: { connection: string; stopped: unknown[] } };
  t.match(info.log, { connection: "connected", stopped: [] }, "/info reports the log");

  // The log closed under the server: without check_db /ok cannot know, with it the round trip fails.
  await srv.server.store.close();
  const checked = await fetch(`${srv.url}/ok?check_db=1`);
  const body = (await checked.json()) as { ok: boolean; reason?: string };
  t.equal(checked.status, 503, "the round trip really went to the log");
  t.equal(body.ok, false);
  t.match(body.reason, /^event log round trip failed: /);
});
