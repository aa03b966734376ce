// The registry on real TCG microVMs: warm pool, boot cap, idle reaper, typed errors, per-sandbox
// serialisation, shutdown, and orphans left by a host that died.
//
// Two lanes run side by side, each one case at a time: the cases on one shared registry, and the
// cases that boot VMs of their own (a registry that is shut down, stand-in hosts that die). The
// second lane touches nothing of the first (its own state dirs), and most of either lane is a VM
// booting on one core, so the file takes about as long as its longer lane.
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Sandboxes } from "../src/sandboxes.ts";
import { alive, codeOf, qemuMissing, tcgBackend, testStateDir, waitFor } from "./support.ts";

const here = path.dirname(fileURLToPath(import.meta.url));
const node = process.execPath;

/** A stand-in host (fixtures/boot-one.ts) that has booted one VM in `dir`: the child and QEMU's pid. */
async function standInHost(dir: string, mode?: "frozen" | "no-pdeathsig") {
  const child = spawn(node, [path.join(here, "fixtures", "boot-one.ts"), dir, ...(mode ? [mode] : [])], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const qemuPid = await new Promise<number>((resolve, reject) => {
    child.stdout.on("data", (d: Buffer) => resolve(Number(d.toString().trim())));
    child.once("exit", (c) => reject(new Error(`fixture exited ${c}`)));
  });
  return { child, qemuPid };
}

describe.skipIf(qemuMissing)(`sandbox registry on microvm-tcg${qemuMissing ? ` (skipped: ${qemuMissing})` : ""}`, () => {
  describe.concurrent("one registry", () => {
    let sandboxes: Sandboxes;
    const stateDir = testStateDir("registry");

    beforeAll(async () => {
      sandboxes = new Sandboxes({ backend: tcgBackend(stateDir), poolSize: 1, maxConcurrentBoots: 1 });
      await sandboxes.start();
      await sandboxes.poolReady();
    });
    afterAll(async () => {
      await sandboxes?.shutdown();
    });

    /** The pooled sandbox the first case takes: the ordering case reuses it rather than boot another. */
    let pooled: string | undefined;

    test.sequential("the warm pool serves create without a boot wait, then refills", async () => {
      const r = await sandboxes.create({});
      pooled = r.sandbox_id;
      expect(r).toMatchObject({ from_pool: true, backend: "microvm-tcg", memory_mb: 256, disk_mb: 64 });
      expect(r.boot_ms).toBeLessThan(200);
      expect((await sandboxes.exec({ sandbox_id: r.sandbox_id, command: "echo hi" })).stdout).toBe("hi\n");
      await sandboxes.poolReady();
      expect(sandboxes.stats.pool_ready).toBe(1);
    });

    test.sequential("concurrent boots are capped (max 1 here) and all succeed", async () => {
      // Non-default memory bypasses the pool, so each create boots.
      const results = await Promise.all([1, 2, 3].map(() => sandboxes.create({ memory_mb: 200 })));
      expect(results.every((r) => !r.from_pool)).toBe(true);
      expect(sandboxes.stats.boots_peak).toBe(1);
      await Promise.all(results.map((r) => sandboxes.destroy(r.sandbox_id)));
    });

    test.sequential("requests on one sandbox run one at a time, in order", async () => {
      const sandbox_id = pooled ?? (await sandboxes.create({})).sandbox_id;
      await sandboxes.exec({ sandbox_id, command: ": > /tmp/log" });
      const t = Date.now();
      await Promise.all(
        [1, 2, 3].map((i) => sandboxes.exec({ sandbox_id, command: `echo start${i} >> /tmp/log; sleep 0.3; echo end${i} >> /tmp/log` })),
      );
      expect(Date.now() - t).toBeGreaterThanOrEqual(900);
      expect((await sandboxes.readFile({ sandbox_id, path: "/tmp/log" })).content).toBe("start1\nend1\nstart2\nend2\nstart3\nend3\n");
      await sandboxes.destroy(sandbox_id);
    });

    test.sequential("typed errors: unknown id, host caps, bad arguments", async () => {
      expect(await codeOf(sandboxes.exec({ sandbox_id: "sbx_nope", command: "true" }))).toBe("sandbox_not_found");
      expect(await codeOf(sandboxes.destroy("sbx_nope"))).toBe("sandbox_not_found");
      expect(await codeOf(sandboxes.create({ memory_mb: 1_000_000 }))).toBe("limit_exceeded");
      expect(await codeOf(sandboxes.create({ vcpus: 1000 }))).toBe("limit_exceeded");
      expect(await codeOf(sandboxes.create({ memory_mb: 128, disk_mb: 100 }))).toBe("limit_exceeded");
      expect(await codeOf(sandboxes.create({ memory_mb: 64 }))).toBe("invalid_argument");
      expect(await codeOf(sandboxes.create({ network: true }))).toBe("network_unavailable");
      expect(await codeOf(sandboxes.create({ image: "ubuntu" }))).toBe("invalid_argument");
      expect(await codeOf(sandboxes.create({ env: { "BAD-NAME": "x" } }))).toBe("invalid_argument");
      const e = await sandboxes.exec({ sandbox_id: "sbx_nope", command: "true" }).catch((x: Error) => x);
      expect((e as Error).message).toMatch(/sbx_/);
    });

    test.sequential("an idle sandbox is reaped after timeout_s", async () => {
      const { sandbox_id } = await sandboxes.create({ timeout_s: 1 });
      const pid = sandboxes.machineOf(sandbox_id).pid;
      await sandboxes.exec({ sandbox_id, command: "true" }); // activity restarts the clock
      expect(await waitFor(() => !sandboxes.list().sandboxes.some((s) => s.sandbox_id === sandbox_id), 5_000)).toBe(true);
      const e = await sandboxes.exec({ sandbox_id, command: "true" }).catch((x: Error & { code: string }) => x);
      expect(e).toMatchObject({ code: "sandbox_not_found" });
      expect((e as Error).message).toContain("reaped");
      expect(await waitFor(() => !alive(pid))).toBe(true);
    });

    test.sequential("a live host's VMs are never taken for orphans", async () => {
      const other = new Sandboxes({ backend: tcgBackend(stateDir), poolSize: 0 });
      expect(await other.start()).toEqual({ orphansKilled: 0 });
      expect(sandboxes.pids().every(alive)).toBe(true);
    });
  });

  describe.concurrent("hosts that stop or die", () => {
    test.sequential("shutdown kills every VM: sandboxes and the pool", async () => {
      const local = new Sandboxes({ backend: tcgBackend(testStateDir("shutdown")), poolSize: 1 });
      await local.start();
      await local.create({ memory_mb: 192 });
      await local.poolReady();
      const pids = local.pids();
      expect(pids.length).toBe(2);
      expect(pids.every(alive)).toBe(true);
      await local.shutdown();
      expect(pids.some(alive)).toBe(false);
      expect(await codeOf(local.create({}))).toBe("host_shutting_down");
    });

    test.sequential("a restarted host kills VMs whose owner died (pidfile + cmdline check)", async () => {
      const dir = testStateDir("orphan");
      // A host process that boots one VM, prints its pid and is then killed with SIGKILL, so it
      // cleans up nothing. QEMU runs without the parent-death signal (a host lacking setpriv) and is
      // frozen, so the guest cannot power itself off either: only the restart sweep can kill it.
      const { child, qemuPid } = await standInHost(dir, "frozen");
      expect(alive(qemuPid)).toBe(true);
      child.kill("SIGKILL");
      await new Promise((r) => child.once("exit", r));
      expect(alive(qemuPid)).toBe(true); // nothing killed it yet: an orphan
      const next = new Sandboxes({ backend: tcgBackend(dir), poolSize: 0 });
      expect(await next.start()).toEqual({ orphansKilled: 1 });
      expect(await waitFor(() => !alive(qemuPid))).toBe(true);
      expect(fs.readdirSync(path.join(dir, "vm"))).toEqual([]);
      await next.shutdown();
    });

    test.sequential("when the host dies, its VMs die with it (parent-death signal)", async () => {
      const dir = testStateDir("pdeath");
      const { child, qemuPid } = await standInHost(dir);
      expect(alive(qemuPid)).toBe(true);
      child.kill("SIGKILL");
      expect(await waitFor(() => !alive(qemuPid), 5_000)).toBe(true);
    });

    test.sequential("without the parent-death signal, the guest powers itself off when the host goes away", async () => {
      const dir = testStateDir("hangup");
      const { child, qemuPid } = await standInHost(dir, "no-pdeathsig");
      child.kill("SIGKILL");
      expect(await waitFor(() => !alive(qemuPid), 60_000)).toBe(true);
    });
  });
});
