// Fallback backend for hosts without QEMU: each exec runs under bubblewrap in fresh namespaces
// (no network, own pid/ipc/uts, no host paths except a read-only /usr), with the sandbox's
// /root and /tmp bound from a per-sandbox host directory so files persist between execs.
// Weaker than a VM: the kernel is shared and /usr is visible. Memory is bounded per process with
// RLIMIT_AS; disk is not bounded (documented in the README).
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { SandboxError } from "../errors.ts";
import { abandonedDirs, ownerStamp } from "../host-state.ts";
import type { BootOptions, ExecOutcome, ExecRequest, ExitInfo, OutputStream, SandboxBackend, SandboxMachine } from "./types.ts";

export interface ProcessBackendOptions {
  /** Per-sandbox directories live in <stateDir>/proc. */
  stateDir: string;
  bwrap?: string;
}

/** The root a sandbox sees: the host's /usr read-only, with the merged-/usr links beside it (the
 * probe runs `true` in exactly this, so a host where it works can run sandboxes). */
export const BWRAP_USR_ROOT: readonly string[] = [
  "--ro-bind",
  "/usr",
  "/usr",
  "--symlink",
  "usr/bin",
  "/bin",
  "--symlink",
  "usr/lib",
  "/lib",
  "--symlink",
  "usr/lib64",
  "/lib64",
];

function bwrapArgs(dir: string): string[] {
  return [
    "--unshare-all",
    "--unshare-user",
    "--uid",
    "1000",
    "--gid",
    "1000",
    "--cap-drop",
    "ALL",
    // bwrap dies with this process (PR_SET_PDEATHSIG), and its pid namespace with it.
    "--die-with-parent",
    "--new-session",
    "--hostname",
    "sandbox",
    ...BWRAP_USR_ROOT,
    "--symlink",
    "usr/sbin",
    "/sbin",
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--bind",
    path.join(dir, "tmp"),
    "/tmp",
    "--bind",
    path.join(dir, "root"),
    "/root",
    "--chdir",
    "/root",
    // Debian's /usr/bin/awk and friends are symlinks through /etc/alternatives.
    ...(fs.existsSync("/etc/alternatives") ? ["--ro-bind", "/etc/alternatives", "/etc/alternatives"] : []),
    "--clearenv",
    "--setenv",
    "PATH",
    "/usr/local/bin:/usr/bin:/bin",
    "--setenv",
    "HOME",
    "/root",
  ];
}

export function createProcessBackend(opts: ProcessBackendOptions): SandboxBackend {
  const root = path.join(opts.stateDir, "proc");
  const bwrap = opts.bwrap ?? "bwrap";

  async function boot(bo: BootOptions): Promise<SandboxMachine> {
    fs.mkdirSync(root, { recursive: true });
    const dir = fs.mkdtempSync(path.join(root, `${randomBytes(3).toString("hex")}-`));
    fs.writeFileSync(path.join(dir, "owner"), ownerStamp());
    fs.mkdirSync(path.join(dir, "root"));
    fs.mkdirSync(path.join(dir, "tmp"));
    const memKb = bo.memoryMb * 1024;
    const running = new Set<ReturnType<typeof spawn>>();
    let gone = false;
    let markExited!: (e: ExitInfo) => void;
    const exited = new Promise<ExitInfo>((resolve) => {
      markExited = resolve;
    });

    function run(req: ExecRequest): Promise<ExecOutcome> {
      if (gone) return Promise.reject(new SandboxError("guest_crashed", "the sandbox is gone"));
      return new Promise((resolve, reject) => {
        // RLIMIT_AS stands in for the VM's memory size; the script runs in its own sh so the
        // limit applies to everything it starts.
        const child = spawn(
          bwrap,
          [...bwrapArgs(dir), "--", "/bin/sh", "-c", 'ulimit -v "$1" && exec /bin/sh -c "$2"', "sh", String(memKb), req.script],
          { stdio: ["pipe", "pipe", "pipe"], detached: true },
        );
        running.add(child);
        const out: Record<OutputStream, Buffer[]> = { stdout: [], stderr: [] };
        const kept: Record<OutputStream, number> = { stdout: 0, stderr: 0 };
        const take = (s: OutputStream) => (d: Buffer) => {
          const room = req.outputLimit + 1 - kept[s];
          if (room <= 0) return;
          const part = d.subarray(0, room);
          out[s].push(part);
          kept[s] += part.length;
          if (req.onOutput) {
            const visible = part.subarray(0, Math.max(0, req.outputLimit - (kept[s] - part.length)));
            if (visible.length) req.onOutput(s, visible);
          }
        };
        child.stdout?.on("data", take("stdout"));
        child.stderr?.on("data", take("stderr"));
        child.stdin?.on("error", () => {});
        child.stdin?.end(req.stdin ? Buffer.from(req.stdin) : undefined);
        let timedOut = false;
        const timer = setTimeout(
          () => {
            timedOut = true;
            try {
              process.kill(-(child.pid ?? 0), "SIGKILL");
            } catch {
              child.kill("SIGKILL");
            }
          },
          Math.max(1, req.timeoutMs),
        );
        child.once("error", (e) => {
          clearTimeout(timer);
          running.delete(child);
          reject(new SandboxError("boot_failed", `bwrap could not start: ${e.message}`));
        });
        child.once("close", (code, signal) => {
          clearTimeout(timer);
          running.delete(child);
          if (gone) return reject(new SandboxError("guest_crashed", "the sandbox was destroyed while the command ran"));
          const exitCode = code ?? 128 + (signal === "SIGKILL" ? 9 : 15);
          resolve({ exitCode, timedOut, stdout: Buffer.concat(out.stdout), stderr: Buffer.concat(out.stderr) });
        });
      });
    }

    const quote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

    return {
      pid: undefined,
      exited,
      exec: run,

      async writeFile(p: string, data: Uint8Array, mode?: number): Promise<void> {
        const chmod = mode === undefined ? "" : ` && chmod ${mode.toString(8)} ${quote(p)}`;
        const r = await run({
          script: `mkdir -p "$(dirname ${quote(p)})" && cat > ${quote(p)}${chmod}`,
          stdin: data,
          timeoutMs: 30_000,
          outputLimit: 4096,
        });
        if (r.exitCode !== 0) throw new SandboxError("file_error", r.stderr.toString("utf8").trim() || `write ${p} failed`);
      },

      async readFile(p: string, limit: number): Promise<Buffer> {
        const r = await run({
          script: `if [ -d ${quote(p)} ]; then echo "${p.replaceAll('"', "")}: is a directory" >&2; exit 1; fi; head -c ${limit + 1} ${quote(p)}`,
          timeoutMs: 30_000,
          outputLimit: limit + 1,
        });
        if (r.exitCode !== 0) throw new SandboxError("file_error", r.stderr.toString("utf8").trim() || `read ${p} failed`);
        if (r.stdout.length > limit)
          throw new SandboxError("limit_exceeded", `${p} is larger than ${limit} bytes, the most read_file returns`);
        return r.stdout;
      },

      async destroy(): Promise<void> {
        if (gone) return;
        gone = true;
        for (const c of running) {
          try {
            process.kill(-(c.pid ?? 0), "SIGKILL");
          } catch {
            c.kill("SIGKILL");
          }
        }
        fs.rmSync(dir, { recursive: true, force: true });
        markExited({ reason: "destroyed", requested: true });
      },
    };
  }

  async function cleanupOrphans(): Promise<number> {
    // bwrap runs with --die-with-parent, so no process outlives a dead host: only files remain.
    const dirs = abandonedDirs(root);
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
    return 0;
  }

  return { kind: "process", boot, cleanupOrphans };
}
