// The examples of the README and docs/getting-started.md (examples/*.mjs, the unmodified iii-sdk)
// against one `npm start` engine: each must exit 0 on its own, within a bound, printing the output
// docs/getting-started.md shows.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoRoot, startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { until } from "@iii-edge/test-support/wait";

/** An example connects, does one thing and disconnects: ~0.5 s here; a hang fails well before the test timeout. */
const EXAMPLE_TIMEOUT_MS = 20_000;

let engine: EngineServer;

beforeAll(async () => {
  engine = await startEngine({ wrangler: true });
}, 120_000);

afterAll(async () => {
  await engine?.stop();
});

/** Node flags an example needs: the keyed worker imports the workspace's own packages, which
 * resolve to their sources through this condition (examples/keyed-cart.mjs says so too). */
const FLAGS: Record<string, string[]> = { "keyed-cart.mjs": ["--conditions=iii-edge-source"] };

function run(example: string): Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string; ms: number }> {
  const started = Date.now();
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [...(FLAGS[example] ?? []), path.join("examples", example)],
      { cwd: repoRoot, env: { ...process.env, III_URL: engine.wsUrl }, timeout: EXAMPLE_TIMEOUT_MS, killSignal: "SIGKILL" },
      (err, stdout, stderr) => {
        const e = err as (Error & { code?: unknown; signal?: string | null }) | null;
        resolve({
          code: e ? (typeof e.code === "number" ? e.code : null) : 0,
          signal: e?.signal ?? null,
          stdout,
          stderr,
          ms: Date.now() - started,
        });
      },
    );
  });
}

const UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";

describe("the README's copy of an example", () => {
  it("every line of code the README shows for examples/connect.mjs is in the file the test runs", () => {
    const readme = readFileSync(path.join(repoRoot, "README.md"), "utf8");
    const block = readme.slice(readme.indexOf("`examples/connect.mjs`")).split("```js\n")[1]!.split("\n```")[0]!;
    const file = readFileSync(path.join(repoRoot, "examples/connect.mjs"), "utf8");
    // A line's trailing comment is the README's gloss (`// { sum: 5 }`); comment lines may be shortened.
    const code = block
      .split("\n")
      .map((l) => l.replace(/\s+\/\/ .*$/, "").trimEnd())
      .filter((l) => l.trim() !== "" && !l.trim().startsWith("//"));
    expect(code.length).toBeGreaterThan(5);
    expect(code.filter((l) => !file.includes(l))).toEqual([]);
  });
});

describe("the examples of docs/getting-started.md", () => {
  const cases: [string, (string | RegExp)[]][] = [
    ["connect.mjs", ["{ sum: 5 }"]],
    ["http-trigger.mjs", ['GET /greet/ada?greeting=hi -> 200 {"message":"hi, ada!"}']],
    [
      "state.mjs",
      [
        'set    {"old_value":null,"new_value":{"text":"hello","n":1}}',
        'get    {"text":"hello","n":1}',
        'update {"old_value":{"text":"hello","n":1},"new_value":{"text":"hello","n":2}}',
        'delete {"text":"hello","n":2}',
        "get    undefined",
      ],
    ],
    ["queue.mjs", [new RegExp(`^enqueued \\{ messageReceiptId: '${UUID}' \\}$`), "handled { image: 'cat.png', width: 640 }"]],
    [
      "keyed-cart.mjs",
      [
        'add    {"cart_id":"ada","items":[{"name":"apple","qty":2}]}',
        'add    {"cart_id":"ada","items":[{"name":"apple","qty":2},{"name":"pear","qty":1}]}',
        'add    {"cart_id":"bob","items":[{"name":"pear","qty":5}]}',
        "no key invalid_arguments",
      ],
    ],
  ];

  it.each(cases)(
    "%s exits 0 by itself and prints what docs/getting-started.md shows",
    async (example, expected) => {
      const r = await run(example);
      const lines = r.stdout.split("\n");
      expect(r.signal, `${example} was killed after ${r.ms} ms (it did not exit by itself)`).toBeNull();
      expect(r.code, `${example} stderr:\n${r.stderr}\nstdout:\n${r.stdout}`).toBe(0);
      for (const want of expected) {
        if (typeof want === "string") expect(lines, `${example} stdout:\n${r.stdout}`).toContain(want);
        else
          expect(
            lines.some((l) => want.test(l)),
            `${example} stdout should have a line matching ${want}:\n${r.stdout}`,
          ).toBe(true);
      }
      expect(r.ms).toBeLessThan(EXAMPLE_TIMEOUT_MS);
    },
    EXAMPLE_TIMEOUT_MS + 5_000,
  );

  it("queue.mjs leaves nothing behind: its message is acknowledged, never redelivered to a worker that left, never dead-lettered", async () => {
    const status = async () => {
      const res = await fetch(`${engine.url}/_iii/invoke`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ function_id: "iii::queue::status", payload: { queue: "jobs" } }),
      });
      return ((await res.json()) as { result: { pending: number; inflight: number; dlq_count: number } }).result;
    };
    const r = await run("queue.mjs");
    expect(r.code, r.stderr).toBe(0);
    // A message whose result never arrived would still be pending here (retried with backoff:
    // 1 + 2 + 4 s against a function nobody serves) and then dead-letter.
    const settled = await until(
      async () => {
        const s = await status();
        return s.pending === 0 && s.inflight === 0 ? s : undefined;
      },
      "the jobs queue settled",
      15_000,
      100,
    );
    expect(settled.dlq_count).toBe(0);
  }, 40_000);
});
