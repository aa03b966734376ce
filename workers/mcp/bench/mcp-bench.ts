// `npm run -s bench:mcp`: what calling a function through the engine's MCP endpoint costs beside
// calling it through `/_iii/invoke`, on exactly `npm start` (the same engine, same run): the
// official SDK's Client `tools/call` of `edge__hello` vs a POST `/_iii/invoke` of `edge::hello` (a
// Worker-hosted function, so no other process is in the path), one call at a time; and `tools/list`.
// A tool call reads the catalog (one `engine::functions::list` + one `engine::functions::info` per
// 32 exposed tools) before it invokes: that is the stateless design's price, measured here.
// Options (env): BENCH_RUNS (3), BENCH_CALLS (200 per kind and run), BENCH_WARMUP_CALLS (20).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { startEngine } from "@iii-edge/test-support/engine-server";
import { fmt, median, pct } from "../../../tests/bench/stats.ts";

const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const CALLS = Number(process.env.BENCH_CALLS ?? 200);
const WARMUP = Number(process.env.BENCH_WARMUP_CALLS ?? 20);

const engine = await startEngine({ vars: { MCP_EXPOSE: "edge::hello" } });
try {
  const client = new Client({ name: "mcp-bench", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${engine.url}/mcp`)));

  const kinds: Record<string, () => Promise<void>> = {
    invoke: async () => {
      const r = await fetch(`${engine.url}/_iii/invoke`, {
        method: "POST",
        body: JSON.stringify({ function_id: "edge::hello", payload: { name: "bench" } }),
      });
      if (!r.ok) throw new Error(`invoke: ${r.status} ${await r.text()}`);
      await r.json();
    },
    "mcp tools/call": async () => {
      const r = await client.callTool({ name: "edge__hello", arguments: { name: "bench" } });
      if (r.isError) throw new Error(`tools/call: ${JSON.stringify(r.content)}`);
    },
    "mcp tools/list": async () => {
      await client.listTools();
    },
  };
  const p50s: Record<string, number[]> = {};
  const p99s: Record<string, number[]> = {};
  for (let run = 0; run < RUNS; run++) {
    // Alternate the order run by run, so neither kind always goes first on a warming engine.
    const order = run % 2 === 0 ? Object.keys(kinds) : Object.keys(kinds).reverse();
    for (const kind of order) {
      const once = kinds[kind]!;
      for (let i = 0; i < WARMUP; i++) await once();
      const ms: number[] = [];
      for (let i = 0; i < CALLS; i++) {
        const t0 = performance.now();
        await once();
        ms.push(performance.now() - t0);
      }
      (p50s[kind] ??= []).push(pct(ms, 50));
      (p99s[kind] ??= []).push(pct(ms, 99));
    }
  }
  await client.close();
  const base = median(p50s.invoke!);
  const baseP99 = median(p99s.invoke!);
  console.log(`MCP endpoint vs /_iii/invoke (edge::hello, sequential, ${CALLS} calls × ${RUNS} runs, medians)`);
  console.log("kind              p50 ms   p99 ms   p50 / invoke   p99 / invoke");
  for (const kind of Object.keys(kinds)) {
    const p50 = median(p50s[kind]!);
    const p99 = median(p99s[kind]!);
    console.log(
      `${kind.padEnd(16)} ${fmt(p50, 2).padStart(7)}  ${fmt(p99, 2).padStart(7)}  ${fmt(p50 / base, 2).padStart(13)}  ${fmt(p99 / baseP99, 2).padStart(13)}`,
    );
  }
} finally {
  await engine.stop();
}
