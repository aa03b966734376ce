// One behaviour suite every backend runs (like Hono's shared router cases), through the registry
// so quoting, env, limits and error codes are covered end to end. Cases a backend cannot honour
// are declared by its capabilities and skipped with the reason.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { SandboxBackend } from "../src/backends/types.ts";
import type { SandboxError } from "../src/errors.ts";
import { OUTPUT_LIMIT_BYTES } from "../src/limits.ts";
import { Sandboxes } from "../src/sandboxes.ts";
import { alive, codeOf, waitFor } from "./support.ts";

export interface BackendCaps {
  /** A real VM: own kernel, initramfs root, OOM killer, tmpfs disk limit, can crash. */
  vm: boolean;
}

export function describeBackendConformance(name: string, make: () => SandboxBackend, caps: BackendCaps, skip: string | false): void {
  // Say why in the run's output, not only in the (default-reporter-hidden) suite name.
  if (skip) console.warn(`[sandbox tests] skipping the ${name} conformance suite: ${skip}`);
  else if (!caps.vm) console.warn(`[sandbox tests] ${name}: skipping the VM-only cases (crash, OOM, disk limit): ${name} is not a VM`);
  describe.skipIf(skip)(`backend conformance: ${name}${skip ? ` (skipped: ${skip})` : ""}`, () => {
    let sandboxes: Sandboxes;
    let id: string;
    const vmOnly = caps.vm ? false : `${name} is not a VM`;
    /** A case only a VM can honour: skipped on other backends (the warning above says why). */
    const vmCase = vmOnly ? test.skip : test.sequential;
    /** The crash and hang cases each spend a VM. They are booted here, beside the shared one, and
     * are ready by the time the cases reach them instead of each waiting a boot of its own. */
    let spare: { crash: Promise<string>; hang: Promise<string> };

    beforeAll(async () => {
      sandboxes = new Sandboxes({ backend: make(), poolSize: 0 });
      await sandboxes.start();
      // The shared sandbox asks first, so it boots first (the boot gate serves creates in order).
      const shared = sandboxes.create({ env: { A: "one", B: "from create" } });
      const own = () => {
        const p = sandboxes.create({}).then((r) => r.sandbox_id);
        p.catch(() => {}); // awaited by its case; a failed boot fails that case, not the run
        return p;
      };
      if (caps.vm) spare = { crash: own(), hang: own() };
      ({ sandbox_id: id } = await shared);
    });
    afterAll(async () => {
      await sandboxes?.shutdown();
    });

    const exec = (command: string, extra: Record<string, unknown> = {}) => sandboxes.exec({ sandbox_id: id, command, ...extra });

    // Two lanes side by side, each one case at a time: the cases on the shared sandbox (one
    // sandbox runs one request at a time, so they could not overlap anyway), and the cases that
    // spend a sandbox of their own, which mostly wait (a crash, a deadline plus the grace).
    describe.concurrent("the shared sandbox", () => {
      test.sequential("stdout, stderr and exit code", async () => {
        const r = await exec("echo out; echo err >&2; exit 7");
        expect(r).toMatchObject({ exit_code: 7, stdout: "out\n", stderr: "err\n", timed_out: false });
        expect(r.truncated).toBeUndefined();
        expect(r.duration_ms).toBeGreaterThanOrEqual(0);
      });

      test.sequential("stdin, text and binary", async () => {
        expect((await exec("cat", { stdin: "hello\nworld" })).stdout).toBe("hello\nworld");
        const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
        expect((await exec("wc -c", { stdin: bytes.toString("base64"), stdin_encoding: "base64" })).stdout.trim()).toBe("256");
      });

      test.sequential("env from create applies to every exec; exec env wins", async () => {
        expect((await exec('echo "$A|$B"')).stdout).toBe("one|from create\n");
        expect((await exec('echo "$A|$B|$C"', { env: { B: "from exec", C: "it's $HOME" } })).stdout).toBe("one|from exec|it's $HOME\n");
      });

      test.sequential("cwd", async () => {
        await sandboxes.writeFile({ sandbox_id: id, path: "/tmp/work dir/f.txt", content: "x" });
        const r = await exec("pwd; ls", { cwd: "/tmp/work dir" });
        expect(r.stdout).toBe("/tmp/work dir\nf.txt\n");
        expect((await exec("pwd")).stdout).toBe("/root\n");
        expect((await exec("true", { cwd: "/nonexistent" })).exit_code).not.toBe(0);
      });

      test.sequential("args are quoted: no expansion, no injection", async () => {
        const args = ["a b", "$HOME", "it's", "`id`", "; echo pwned", "*", "", "line\nbreak"];
        const r = await exec("printf '[%s]\\n'", { args });
        expect(r.stdout).toBe(args.map((a) => `[${a}]\n`).join(""));
      });

      test.sequential("write_file / read_file round trip, binary-safe, with mode", async () => {
        const bytes = Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7) % 256));
        await sandboxes.writeFile({ sandbox_id: id, path: "/root/a/b/blob.bin", content: bytes.toString("base64"), encoding: "base64" });
        const back = await sandboxes.readFile({ sandbox_id: id, path: "a/b/blob.bin", encoding: "base64" });
        expect(Buffer.from(back.content, "base64").equals(bytes)).toBe(true);
        expect(back.bytes).toBe(4096);
        await sandboxes.writeFile({ sandbox_id: id, path: "run.sh", content: '#!/bin/sh\necho ran "$1"\n', mode: 0o755 });
        expect((await exec("./run.sh", { args: ["ok"] })).stdout).toBe("ran ok\n");
        expect((await sandboxes.readFile({ sandbox_id: id, path: "/root/run.sh" })).content).toContain("echo ran");
      });

      test.sequential("file errors are typed", async () => {
        expect(await codeOf(sandboxes.readFile({ sandbox_id: id, path: "/no/such/file" }))).toBe("file_error");
        expect(await codeOf(sandboxes.readFile({ sandbox_id: id, path: "/tmp" }))).toBe("file_error");
        await exec("head -c 600000 /dev/zero > /tmp/big");
        expect(await codeOf(sandboxes.readFile({ sandbox_id: id, path: "/tmp/big" }))).toBe("limit_exceeded");
        expect(await codeOf(sandboxes.writeFile({ sandbox_id: id, path: "/tmp/x", content: "a".repeat(600_000) }))).toBe("limit_exceeded");
      });

      test.sequential("output is truncated at the limit, the command still completes", async () => {
        const r = await exec(`head -c ${OUTPUT_LIMIT_BYTES + 50_000} /dev/zero | tr '\\0' a; echo done >&2`);
        expect(r.stdout.length).toBe(OUTPUT_LIMIT_BYTES);
        expect(r.truncated).toEqual({ stdout: true });
        expect(r.stderr).toBe("done\n");
        expect(r.exit_code).toBe(0);
        const exact = await exec(`head -c ${OUTPUT_LIMIT_BYTES} /dev/zero | tr '\\0' b`);
        expect(exact.truncated).toBeUndefined();
      });

      test.sequential("a command that hangs is killed at its deadline, keeping its partial output", async () => {
        const r = await exec("echo before; sleep 60; echo after", { timeout_ms: 1500 });
        expect(r).toMatchObject({ timed_out: true, exit_code: 124, stdout: "before\n" });
        expect(r.duration_ms).toBeLessThan(8_000);
        expect((await exec("echo alive")).stdout).toBe("alive\n");
      });

      test.sequential("processes a command leaves behind do not hold its result", async () => {
        const t = Date.now();
        const r = await exec("sleep 60 & echo started", { timeout_ms: 20_000 });
        expect(r).toMatchObject({ stdout: "started\n", timed_out: false });
        expect(Date.now() - t).toBeLessThan(10_000);
      });

      test.sequential("streams output while the command runs", async () => {
        const chunks: { stream: string; data: string; at: number }[] = [];
        const t = Date.now();
        const r = await sandboxes.exec({ sandbox_id: id, command: "for i in 1 2 3; do echo line$i; sleep 0.4; done; echo e >&2" }, (c) =>
          chunks.push({ stream: c.stream, data: c.data, at: Date.now() - t }),
        );
        expect(r.stdout).toBe("line1\nline2\nline3\n");
        expect(r.exec_id).toMatch(/^exe_/);
        expect(
          chunks
            .filter((c) => c.stream === "stdout")
            .map((c) => c.data)
            .join(""),
        ).toBe(r.stdout);
        expect(
          chunks
            .filter((c) => c.stream === "stderr")
            .map((c) => c.data)
            .join(""),
        ).toBe("e\n");
        // The first line arrived well before the command finished.
        expect(chunks[0].at).toBeLessThan(r.duration_ms - 500);
      });

      test.sequential("isolation: host files are invisible", async () => {
        const marker = path.join(os.tmpdir(), `sbx-marker-${process.pid}`);
        fs.writeFileSync(marker, "secret");
        try {
          const r = await exec(`cat ${marker}`);
          expect(r.exit_code).not.toBe(0);
          expect(r.stdout).not.toContain("secret");
          expect((await exec("ls -a /tmp")).stdout).not.toContain(path.basename(marker));
        } finally {
          fs.rmSync(marker);
        }
      });

      vmCase("isolation: the guest root is only the initramfs", async () => {
        expect((await exec("ls /")).stdout.split("\n").filter(Boolean).sort()).toEqual([
          "agent.sh",
          "bin",
          "dev",
          "init",
          "lib",
          "proc",
          "root",
          "run",
          "sys",
          "tmp",
        ]);
        expect((await exec("touch /x")).stderr).toContain("Read-only file system");
      });

      test.sequential("isolation: no network, only loopback", async () => {
        const r = await exec("cat /proc/net/dev");
        const ifaces = r.stdout
          .split("\n")
          .slice(2)
          .map((l) => l.trim().split(":")[0])
          .filter(Boolean);
        expect(ifaces).toEqual(["lo"]);
        const routes = await exec("cat /proc/net/route");
        expect(routes.stdout.split("\n").slice(1).filter(Boolean)).toEqual([]);
      });

      test.sequential("memory limit: allocating past memory_mb fails, the sandbox survives", async () => {
        // Doubling a string until allocation fails: the VM's OOM killer (or RLIMIT_AS) stops it.
        const r = await exec("awk 'BEGIN { s = \"x\"; while (1) s = s s }'", { timeout_ms: 60_000 });
        expect(r.timed_out).toBe(false);
        expect(r.exit_code).not.toBe(0);
        if (caps.vm) {
          expect(r.exit_code).toBe(137); // SIGKILL from the guest OOM killer
          const total = Number((await exec("awk '/MemTotal/ { print int($2 / 1024) }' /proc/meminfo")).stdout);
          expect(total).toBeLessThanOrEqual(256);
        }
        expect((await exec("echo alive")).stdout).toBe("alive\n");
      });

      vmCase("disk limit: writing past the tmpfs size fails with ENOSPC", async () => {
        // /tmp and /root share the 64 MiB disk: 40 + 40 does not fit.
        const r = await exec(
          "dd if=/dev/zero of=/tmp/fill bs=1M count=40 && dd if=/dev/zero of=/root/fill bs=1M count=40; echo rc=$?; rm -f /tmp/fill /root/fill",
        );
        expect(r.stderr).toContain("No space left on device");
        expect(r.stdout).toMatch(/rc=[1-9]/);
        expect((await exec("df -m /root | tail -n 1")).stdout).toMatch(/\s64\s/);
        expect((await exec("echo alive")).stdout).toBe("alive\n");
      });
    });

    describe.concurrent("sandboxes of their own", () => {
      vmCase("a crashing guest is reported as guest_crashed and cleaned up", async () => {
        const sandbox_id = await spare.crash;
        const pid = sandboxes.machineOf(sandbox_id).pid;
        expect(sandboxes.pids()).toContain(pid);
        expect(await codeOf(sandboxes.exec({ sandbox_id, command: "echo c > /proc/sysrq-trigger" }))).toBe("guest_crashed");
        expect(sandboxes.list().sandboxes.map((s) => s.sandbox_id)).not.toContain(sandbox_id);
        expect(await codeOf(sandboxes.exec({ sandbox_id, command: "true" }))).toBe("guest_crashed");
        expect(pid).toBeDefined();
        expect(sandboxes.pids()).not.toContain(pid);
        expect(await waitFor(() => !alive(pid))).toBe(true);
      });

      vmCase("a guest that stops answering is killed: exec_timeout, then guest_crashed", async () => {
        const sandbox_id = await spare.hang;
        // Freeze the agent itself: the command finishes but no answer ever comes back. What the
        // guest printed on its console last is kept in the error, read before the VM is killed.
        const marker = `last words ${Math.random().toString(36).slice(2)}`;
        const t = Date.now();
        const hung = await sandboxes
          .exec({ sandbox_id, command: `echo '${marker}' > /dev/console; kill -STOP $PPID`, timeout_ms: 500 })
          .then(
            () => undefined,
            (e: unknown) => e as SandboxError,
          );
        expect(hung?.code).toBe("exec_timeout");
        expect(hung?.message).toMatch(/\(console: .*\)$/);
        expect(hung?.message).toContain(marker);
        expect(Date.now() - t).toBeLessThan(15_000);
        expect(await codeOf(sandboxes.exec({ sandbox_id, command: "true" }))).toBe("guest_crashed");
        await expect(sandboxes.exec({ sandbox_id, command: "true" })).rejects.toThrow(marker);
        expect(sandboxes.list().sandboxes.map((s) => s.sandbox_id)).toEqual([id]);
      });
    });
  });
}
