// A second `npm start` on a port where an engine already runs: it must say so (naming the pid and
// how to pick another port) and touch nothing — no build (the running `wrangler dev` watches the
// demo's bundle and would reload, dropping every socket), no state, no second wrangler.
import { execFile } from "node:child_process";
import { statSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoRoot, startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { RawSocket } from "@iii-edge/test-support/raw-socket";

let engine: EngineServer;
const BUNDLE = path.join(repoRoot, "demo-app", "dist", "index.html");

beforeAll(async () => {
  engine = await startEngine();
}, 120_000);

afterAll(async () => {
  await engine?.stop();
});

function npmStart(port: number): Promise<{ code: number | null; stderr: string; ms: number }> {
  const started = Date.now();
  return new Promise((resolve) => {
    execFile(
      "npm",
      ["start"],
      { cwd: repoRoot, env: { ...process.env, PORT: String(port) }, timeout: 60_000, killSignal: "SIGKILL" },
      (err, _stdout, stderr) => {
        const e = err as (Error & { code?: unknown }) | null;
        resolve({ code: e ? (typeof e.code === "number" ? e.code : null) : 0, stderr, ms: Date.now() - started });
      },
    );
  });
}

describe("a second npm start", () => {
  it("names the running engine and its pid, suggests PORT=, and leaves the running engine and its sockets alone", async () => {
    const worker = await RawSocket.open(engine.wsUrl);
    worker.serve("second::ping", () => "pong");
    const caller = await RawSocket.open(engine.wsUrl);
    await expect.poll(async () => (await caller.call("second::ping")).result, { timeout: 10_000 }).toBe("pong");
    const bundleBefore = statSync(BUNDLE).mtimeMs;

    const r = await npmStart(engine.port);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(
      new RegExp(`an engine is already running on :${engine.port} \\(pid \\d+\\); use PORT=${engine.port + 1} npm start`),
    );

    // Nothing was rebuilt, and the sockets of the running engine are the same ones, still served.
    expect(statSync(BUNDLE).mtimeMs).toBe(bundleBefore);
    expect((await caller.call("second::ping")).result).toBe("pong");
    expect(worker.closed).toBe(false);
    expect(caller.closed).toBe(false);
    await Promise.all([worker.close(), caller.close()]);
  });
});
