// Where the rank tables come from (src/ranks.ts): the Worker's static-asset files, as the console's
// build writes them, give the same counts as gpt-tokenizer's own modules; a table that does not load
// is a typed error, never a count, changes nothing, and is tried again on the next call; the Worker
// bundle's default refuses rather than count without tables.
import { describe, expect, it } from "vitest";
import { rankAssetFiles } from "../src/rank-assets.ts";
import { assetRanks, noRanks, RANK_ASSET_DIR, RANK_TABLE_SIZES, type AssetFetcher, type RankLoader } from "../src/ranks.ts";
import { defaultRanks as workerdDefault } from "../src/ranks-workerd.ts";
import { compactionConfigFrom } from "../src/index.ts";
import { COMPACTION_LEASE_SCOPE, tryLease } from "../src/lease.ts";
import { counterFor, loadEncoding, wireRequestTokens } from "../src/tokens.ts";
import { fakeEngine } from "./support/fake-engine.ts";
import { JARGON, said, TINY } from "./support/fixtures.ts";

/** Text that exercises the byte-level entries (non-UTF-8 tokens), code, and non-Latin scripts. */
const MIXED = 'fn main() { println!("héllo, 世界 🚀"); } // Привет, γειά σου — ١٢٣ \u0000\u00ff'.repeat(20);

/** A fetch answering the build's own asset files (what `npm run build` puts in demo-app/dist), and
 * counting what it was asked. */
async function builtAssets(): Promise<AssetFetcher & { asked: string[] }> {
  const files = new Map((await rankAssetFiles()).map((f) => [`/${f.fileName}`, f.source]));
  const asked: string[] = [];
  return {
    asked,
    async fetch(input) {
      const path = new URL(typeof input === "string" ? input : input.url).pathname;
      asked.push(path);
      const body = files.get(path);
      return body === undefined ? new Response("not found", { status: 404 }) : new Response(body, { status: 200 });
    },
  };
}

/** A loader of its own source name, so its encoders are cached apart from every other test's. */
const named = (source: string, load: RankLoader["load"]): RankLoader => ({ source: `${source}-${crypto.randomUUID()}`, load });

describe("the rank tables as the Worker's static assets", () => {
  it("the build writes one file per encoding under /_iii/tokenizer/, each table whole", async () => {
    const files = await rankAssetFiles();
    expect(files.map((f) => f.fileName).sort()).toEqual(["_iii/tokenizer/cl100k_base.json", "_iii/tokenizer/o200k_base.json"]);
    for (const f of files) {
      const name = f.fileName.slice(RANK_ASSET_DIR.length - 1, -".json".length) as keyof typeof RANK_TABLE_SIZES;
      expect(JSON.parse(f.source)).toHaveLength(RANK_TABLE_SIZES[name]);
    }
  });

  it("count exactly as gpt-tokenizer's own tables: the cookbook's figures, and text with byte-level tokens", async () => {
    const assets = await builtAssets();
    const loader: RankLoader = { ...assetRanks(assets), source: `assets-${crypto.randomUUID()}` };
    for (const [name, expected] of [
      ["o200k_base", 124],
      ["cl100k_base", 129],
    ] as const) {
      const fromAssets = await loadEncoding(name, loader);
      const fromPackage = await loadEncoding(name);
      expect(fromAssets).not.toBe(fromPackage); // built from the asset table, not the package's encoder
      const count = (t: string) => (t ? fromAssets.countTokens(t, { disallowedSpecial: new Set() }) : 0);
      expect(wireRequestTokens({ messages: JARGON }, name, count)).toBe(expected);
      expect(count(MIXED)).toBe(fromPackage.countTokens(MIXED, { disallowedSpecial: new Set() }));
      expect(count(MIXED)).toBeGreaterThan(100);
    }
    // Each table fetched once, then the built encoder is reused.
    await counterFor({ provider: "openai", id: "gpt-4o" }, loader);
    expect(assets.asked.sort()).toEqual(["/_iii/tokenizer/cl100k_base.json", "/_iii/tokenizer/o200k_base.json"]);
  });

  it("a Worker env with ASSETS reads the tables from it; Node's env keeps the package's", () => {
    const assets: AssetFetcher = { fetch: async () => new Response(null, { status: 404 }) };
    expect(compactionConfigFrom({ ASSETS: assets }).ranks?.source).toBe("assets");
    expect(compactionConfigFrom({ PATH: "/usr/bin" }).ranks).toBeUndefined();
  });
});

describe("a table that does not load", () => {
  it("is tokenizer_unavailable, saying which table and why, for each way of failing", async () => {
    const refused = { fetch: async () => new Response("no", { status: 404 }) };
    await expect(loadEncoding("o200k_base", { ...assetRanks(refused), source: `a-${crypto.randomUUID()}` })).rejects.toMatchObject({
      code: "tokenizer_unavailable",
      message: expect.stringMatching(/^o200k_base rank table: ASSETS answered 404 for \/_iii\/tokenizer\/o200k_base\.json/),
    });
    const broken = { fetch: async () => new Response("[1,2", { status: 200 }) };
    await expect(loadEncoding("cl100k_base", { ...assetRanks(broken), source: `b-${crypto.randomUUID()}` })).rejects.toMatchObject({
      code: "tokenizer_unavailable",
      message: expect.stringContaining("is not JSON"),
    });
    // A table of another length (another encoding's, a truncated file) would count wrong: refused.
    const cl100k = (await rankAssetFiles()).find((f) => f.fileName.includes("cl100k"))!.source;
    const swapped = { fetch: async () => new Response(cl100k, { status: 200 }) };
    await expect(loadEncoding("o200k_base", { ...assetRanks(swapped), source: `c-${crypto.randomUUID()}` })).rejects.toMatchObject({
      code: "tokenizer_unavailable",
      message: expect.stringContaining("100256 entries, the encoding has 199998"),
    });
    const down = new TypeError("network connection lost");
    const thrown = named("thrown", () => Promise.reject(down));
    const e = await loadEncoding("o200k_base", thrown).catch((x: unknown) => x);
    expect(e).toMatchObject({ code: "tokenizer_unavailable", cause: down });
  });

  it("is not remembered: the next count loads it again", async () => {
    let calls = 0;
    const flaky = named("flaky", async (name) => {
      calls++;
      if (calls === 1) throw new Error("first load fails");
      return (await import("../src/ranks-package.ts")).defaultRanks.load(name);
    });
    await expect(counterFor({ provider: "openai", id: "gpt-4o" }, flaky)).rejects.toMatchObject({ code: "tokenizer_unavailable" });
    const c = await counterFor({ provider: "openai", id: "gpt-4o" }, flaky);
    expect(c.raw("hello world")).toBe(2);
    expect(calls).toBe(2);
  });

  it("the Worker bundle's default (no ASSETS given) refuses instead of counting", async () => {
    await expect(workerdDefault.load("o200k_base")).rejects.toMatchObject({
      code: "tokenizer_unavailable",
      message: expect.stringContaining("ASSETS binding"),
    });
    await expect(counterFor({ provider: "openai", id: "gpt-4o" }, noRanks("none here"))).rejects.toMatchObject({
      code: "tokenizer_unavailable",
    });
  });

  it("compact_now fails with the typed error and changes nothing", async () => {
    const e = fakeEngine({ models: [TINY], config: { ranks: named("missing", (name) => noRanks("gone").load(name)) } });
    await e.call("session-tree::ensure", { session_id: "s" });
    const entries = Array.from({ length: 8 }, (_, k) => ({ entry_id: `a${k}`, message: said(` alpha`.repeat(800)) }));
    await e.call("session-tree::append_many", { session_id: "s", entries });
    const model = { id: TINY.id, providerID: "openai", limit: { context: 4_000, output: 500 } };
    await expect(e.call("context-compaction::compact_now", { session_id: "s", model })).rejects.toMatchObject({
      code: "tokenizer_unavailable",
    });
    await expect(e.call("context-compaction::prune_tool_outputs", { session_id: "s", model })).rejects.toMatchObject({
      code: "tokenizer_unavailable",
    });
    expect(e.summaries).toHaveLength(0);
    expect((await e.call<{ compactions: unknown[] }>("session-tree::compactions", { session_id: "s" })).compactions).toEqual([]);
    const path = await e.call<{ messages: { entry_id: string }[] }>("session-tree::messages", { session_id: "s" });
    expect(path.messages.map((m) => m.entry_id)).toEqual(entries.map((x) => x.entry_id));
    // The lease was given back: the next compaction of the session can take it.
    const trigger = <I, O>(r: { function_id: string; payload?: I }) => e.call<O>(r.function_id, r.payload);
    const lease = await tryLease(trigger, COMPACTION_LEASE_SCOPE, "s");
    expect(lease).toBeTruthy();
    await lease?.release();
  });
});
