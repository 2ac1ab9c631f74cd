/** Reads one sample of a server's `/metrics` (Prometheus text format). */
export async function metricValue(url: string, name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const wanted = Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .join(",");
  const line = text.split("\n").find((l) => l.startsWith(wanted ? `${name}{${wanted}} ` : `${name} `));
  if (line === undefined) throw new Error(`no ${name}{${wanted}} in /metrics`);
  return Number(line.slice(line.lastIndexOf(" ") + 1));
}

/** A process's claims of one kind: appended (won) and refused by the log because another process's came first (lost). */
export async function claimCounts(url: string, kind: "run" | "cron" | "webhook"): Promise<{ won: number; lost: number }> {
  return {
    won: await metricValue(url, "agent_server_claims_won_total", { kind }),
    lost: await metricValue(url, "agent_server_claims_lost_total", { kind }),
  };
}

/** The owner id a process writes into its claims of one kind (from `agent_server_claim_owner_info`). */
export async function claimOwner(url: string, kind: "run" | "cron" | "webhook"): Promise<string> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const match = new RegExp(`^agent_server_claim_owner_info\\{kind="${kind}",owner="([^"]+)"\\} 1$`, "m").exec(text);
  if (!match) throw new Error(`no ${kind} claim owner in /metrics`);
  return match[1];
}
