// One QEMU `microvm` per sandbox. The guest is a Debian cloud kernel plus a busybox initramfs
// (guest/); its agent talks over a virtio-serial port whose QEMU chardev connects to a unix
// socket this process listens on. No NIC, no shared folder: the guest sees only its initramfs.
// With accel "kvm" it runs on hardware virtualisation; with "tcg" on QEMU's software CPU.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { AGENT_FILE_TIMEOUT_MS, AGENT_GRACE_MS, BOOT_TIMEOUT_MS } from "../limits.ts";
import { SandboxError } from "../errors.ts";
import { abandonedDirs, ownerStamp, processCmdline } from "../host-state.ts";
import { AgentChannel } from "./agent-channel.ts";
import type { BackendKind, BootOptions, ExecOutcome, ExecRequest, ExitInfo, SandboxBackend, SandboxMachine } from "./types.ts";

export interface MicrovmOptions {
  accel: "kvm" | "tcg";
  kernel: string;
  initrd: string;
  /** Per-VM directories live in <stateDir>/vm. */
  stateDir: string;
  qemu?: string;
  bootTimeoutMs?: number;
  /** Start QEMU through `setpriv --pdeathsig KILL` (default true; tests turn it off to make orphans). */
  parentDeathSignal?: boolean;
  /** Worker VMs: add a second virtio-serial port named "engine", the guest runtime's only way out
   * (guest/worker/runtime.mjs). Boot then also waits for the runtime's hello on it. */
  enginePort?: boolean;
  /** Boot with LEAN_BOOT's kernel options (default true; bench/boot-cpu.ts boots without them too). */
  leanBoot?: boolean;
}

/** Header of a frame on the engine port: type (1 byte) | conn (u32 BE) | length (u32 BE). */
const ENGINE_FRAME_HEADER = 9;
/** The runtime's hello is a small JSON object; a longer first frame means a corrupt stream. */
const MAX_HELLO_BYTES = 4096;

/** Wait for the guest runtime's hello (an `H` frame) on the engine port; leave later bytes unread. */
function awaitHello(sock: net.Socket): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    const onData = (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (buf.length < ENGINE_FRAME_HEADER) return;
      const len = buf.readUInt32BE(5);
      if (buf[0] !== 0x48 || len > MAX_HELLO_BYTES) {
        sock.off("data", onData);
        return reject(new SandboxError("boot_failed", "the guest runtime sent something other than its hello"));
      }
      if (buf.length < ENGINE_FRAME_HEADER + len) return;
      sock.off("data", onData);
      sock.pause();
      const rest = buf.subarray(ENGINE_FRAME_HEADER + len);
      if (rest.length) sock.unshift(rest);
      try {
        resolve(JSON.parse(buf.subarray(ENGINE_FRAME_HEADER, ENGINE_FRAME_HEADER + len).toString("utf8")) as Record<string, unknown>);
      } catch {
        reject(new SandboxError("boot_failed", "the guest runtime's hello is not JSON"));
      }
    };
    sock.on("data", onData);
  });
}

/** QEMU's stderr kept for error messages; it holds the only useful cause of a failed start. */
const STDERR_KEPT_BYTES = 4096;
/** sun_path holds 108 bytes including the terminating NUL. */
const MAX_UNIX_SOCKET_PATH = 107;
/** Tail of the guest console kept for a guest_crashed or exec_timeout message (kernel panic text, a stall report). */
const CONSOLE_TAIL_BYTES = 400;

/** Under TCG the guest TSC runs at the host's rate; telling the kernel so avoids its PIT
 * calibration, which fails on a busy host and then hangs the boot (measured: 10 of 12 boots). */
function hostTscKhz(): number {
  try {
    const m = fs.readFileSync("/proc/cpuinfo", "utf8").match(/^cpu MHz\s*:\s*([\d.]+)/m);
    return m ? Math.round(Number(m[1]) * 1000) : 0;
  } catch {
    return 0;
  }
}

/**
 * Kernel options that cut the CPU a boot costs; under TCG every guest instruction is emulated, and
 * the boot is most of a sandbox's CPU (an idle guest costs about 0.01 CPU-s per second). Measured
 * with bench/boot-cpu.ts (`npm run bench:cpu`): a fifth off the boot CPU of a command VM (2.35 to
 * 1.89 CPU-s) and of a worker VM (11.6 to 9.0), README.md, "Where a VM's CPU goes".
 * - init_on_alloc/init_on_free=0: Debian zeroes every page the kernel hands out or takes back,
 *   the 125 MB of a worker image included. Zeroing guards one kernel's memory against its own
 *   users; here the guest's only user is the sandbox, which is root in it anyway.
 * - mitigations=off: the same reasoning; the wall is the VM, not the guest kernel. Under TCG the
 *   guest's speculation barriers guard nothing on the host and cost emulated instructions.
 * - cryptomgr.notests: the crypto self-tests; lsm=capability: AppArmor, TOMOYO, Landlock, Yama and
 *   BPF's LSM set themselves up for a guest that loads no policy; audit=0: nothing reads the audit log.
 * - pci=off, 8250.nr_uarts=1, no_timer_check: microvm has no PCI bus and one serial port, and its
 *   timer is known good: no probing for them.
 */
const LEAN_BOOT =
  "init_on_alloc=0 init_on_free=0 mitigations=off cryptomgr.notests lsm=capability audit=0 pci=off 8250.nr_uarts=1 no_timer_check";

/** util-linux `setpriv --pdeathsig KILL` makes the kernel kill QEMU when this process dies, even
 * by SIGKILL. Node cannot set PR_SET_PDEATHSIG itself. Used when present (Debian: always). */
function findSetpriv(): string | undefined {
  for (const d of ["/usr/bin", "/bin", "/usr/sbin", "/sbin"]) {
    const p = path.join(d, "setpriv");
    if (fs.existsSync(p)) return p;
  }
  return undefined;
}

/** The line that explains a guest's death: the kernel's panic line if there is one, else the tail. */
function consoleCause(file: string): string {
  let text = "";
  try {
    const b = fs.readFileSync(file);
    text = b.subarray(Math.max(0, b.length - 64 * 1024)).toString("utf8");
  } catch {
    return "";
  }
  const panic = text.match(/Kernel panic[^\n]*/);
  if (panic) return panic[0].trim();
  return text.slice(-CONSOLE_TAIL_BYTES).replace(/\s+/g, " ").trim();
}

export function createMicrovmBackend(opts: MicrovmOptions): SandboxBackend {
  const kind: BackendKind = opts.accel === "kvm" ? "microvm-kvm" : "microvm-tcg";
  const vmRoot = path.join(opts.stateDir, "vm");
  const setpriv = opts.parentDeathSignal === false ? undefined : findSetpriv();
  const tscKhz = opts.accel === "tcg" ? hostTscKhz() : 0;
  const qemu = opts.qemu ?? "qemu-system-x86_64";

  async function boot(bo: BootOptions): Promise<SandboxMachine> {
    fs.mkdirSync(vmRoot, { recursive: true });
    const dir = fs.mkdtempSync(path.join(vmRoot, `${randomBytes(3).toString("hex")}-`));
    fs.writeFileSync(path.join(dir, "owner"), ownerStamp());
    const sock = path.join(dir, "agent.sock");
    if (Buffer.byteLength(sock) > MAX_UNIX_SOCKET_PATH) {
      fs.rmSync(dir, { recursive: true, force: true });
      throw new SandboxError("boot_failed", `state dir path too long for a unix socket (${sock}); use a shorter --state-dir`);
    }
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(sock, resolve));
    const engineSock = path.join(dir, "engine.sock");
    const engineServer = opts.enginePort ? net.createServer() : undefined;
    if (engineServer) await new Promise<void>((resolve) => engineServer.listen(engineSock, resolve));

    const append = [
      "console=ttyS0 quiet panic=-1",
      opts.leanBoot === false ? "" : LEAN_BOOT,
      `sbx.disk_mb=${bo.diskMb}`,
      tscKhz ? `tsc_early_khz=${tscKhz} tsc=reliable` : "",
    ]
      .filter(Boolean)
      .join(" ");
    const qemuArgs = [
      "-M",
      "microvm",
      ...(opts.accel === "kvm" ? ["-accel", "kvm", "-cpu", "host"] : ["-accel", "tcg,tb-size=64", "-cpu", "max"]),
      "-m",
      `${bo.memoryMb}M`,
      "-smp",
      String(bo.vcpus),
      "-nodefaults",
      "-no-user-config",
      "-display",
      "none",
      "-no-reboot",
      "-serial",
      `file:${path.join(dir, "console.log")}`,
      "-pidfile",
      path.join(dir, "qemu.pid"),
      "-kernel",
      opts.kernel,
      "-initrd",
      opts.initrd,
      "-append",
      append,
      "-device",
      "virtio-serial-device",
      "-chardev",
      `socket,id=agent,path=${sock}`,
      "-device",
      "virtserialport,chardev=agent,name=agent",
      ...(engineServer ? ["-chardev", `socket,id=engine,path=${engineSock}`, "-device", "virtserialport,chardev=engine,name=engine"] : []),
    ];
    const [cmd, args] = setpriv ? [setpriv, ["--pdeathsig", "KILL", "--", qemu, ...qemuArgs]] : [qemu, qemuArgs];
    const child = spawn(cmd, args, { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr?.on("data", (d: Buffer) => {
      if (stderr.length < STDERR_KEPT_BYTES) stderr += d.toString("utf8");
    });

    let destroyRequested = false;
    let channel: AgentChannel | undefined;
    let engineConn: net.Socket | undefined;
    // QEMU connects both chardevs as it starts, before the guest boots; catch the engine one whenever it comes.
    const engineConnected = engineServer
      ? new Promise<net.Socket>((resolve) =>
          engineServer.once("connection", (c: net.Socket) => {
            engineConn = c;
            c.on("error", () => {});
            engineServer.close();
            resolve(c);
          }),
        )
      : undefined;
    const exited = new Promise<ExitInfo>((resolve) => {
      const done = (how: string) => {
        const consoleTail = consoleCause(path.join(dir, "console.log"));
        const why = [how, stderr.trim() && `qemu: ${stderr.trim().slice(0, 500)}`, consoleTail && `console: ${consoleTail}`]
          .filter(Boolean)
          .join("; ");
        channel?.fail(new SandboxError("guest_crashed", `the VM exited (${why})`));
        server.close();
        engineServer?.close();
        engineConn?.destroy();
        fs.rmSync(dir, { recursive: true, force: true });
        resolve({ reason: why, requested: destroyRequested });
      };
      child.once("exit", (code, signal) => done(signal ? `qemu killed by ${signal}` : `qemu exit code ${code}`));
      child.once("error", (e) => done(`qemu could not start: ${e.message}`));
    });
    const kill = () => {
      try {
        child.kill("SIGKILL");
      } catch {
        // already gone
      }
    };
    /** A guest that stopped answering: read its console before the kill removes the VM's
     * directory, then kill it. The tail (a soft lockup, an RCU stall, an OOM report) says why. */
    const killHung = (): string => {
      const tail = consoleCause(path.join(dir, "console.log"));
      kill();
      return tail ? `console: ${tail}` : "the guest console was empty";
    };

    const bootTimeoutMs = opts.bootTimeoutMs ?? BOOT_TIMEOUT_MS;
    let hello: Record<string, unknown> | undefined;
    let timer: NodeJS.Timeout | undefined;
    try {
      const conn = await Promise.race([
        new Promise<net.Socket>((resolve) => server.once("connection", resolve)),
        exited.then((e) => {
          throw new SandboxError("boot_failed", `QEMU exited before connecting: ${e.reason}`);
        }),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new SandboxError("boot_failed", `no agent connection within ${bootTimeoutMs} ms`)),
            bootTimeoutMs,
          );
        }),
      ]);
      server.close(); // one connection per VM; stop accepting
      channel = new AgentChannel(conn);
      await Promise.race([
        engineConnected
          ? channel.ready.then(async () => {
              hello = await awaitHello(await engineConnected);
            })
          : channel.ready,
        exited.then((e) => {
          throw new SandboxError("boot_failed", `the VM exited while booting: ${e.reason}`);
        }),
        new Promise<never>((_, reject) => {
          clearTimeout(timer);
          timer = setTimeout(
            () =>
              reject(
                new SandboxError(
                  "boot_failed",
                  `the guest ${engineConnected ? "runtime" : "agent"} was not ready within ${bootTimeoutMs} ms`,
                ),
              ),
            bootTimeoutMs,
          );
        }),
      ]);
    } catch (e) {
      kill();
      await exited;
      if (e instanceof SandboxError && e.code === "boot_failed") throw e;
      throw new SandboxError("boot_failed", e instanceof Error ? e.message : String(e), { cause: e });
    } finally {
      clearTimeout(timer);
    }
    const ch = channel;

    return {
      pid: child.pid,
      exited,
      engine: engineConn && hello ? { socket: engineConn, hello } : undefined,

      async exec(req: ExecRequest): Promise<ExecOutcome> {
        const cmd = Buffer.from(req.script);
        const stdin = req.stdin ?? new Uint8Array(0);
        const ms = Math.max(1, Math.round(req.timeoutMs));
        const onChunk = req.onOutput ? (no: string, bytes: Buffer) => req.onOutput?.(no === "1" ? "stdout" : "stderr", bytes) : undefined;
        const { fields, blobs } = await ch.request(
          "X",
          [ms, req.outputLimit, onChunk ? 1 : 0, cmd.length, stdin.length],
          [cmd, stdin],
          ms + AGENT_GRACE_MS,
          killHung,
          onChunk,
        );
        return { exitCode: Number(fields[2]), timedOut: fields[3] === "1", stdout: blobs[0], stderr: blobs[1] };
      },

      async writeFile(p: string, data: Uint8Array, mode?: number): Promise<void> {
        const pb = Buffer.from(p);
        const { fields, blobs } = await ch.request(
          "W",
          [mode === undefined ? "-" : mode.toString(8), pb.length, data.length],
          [pb, data],
          AGENT_FILE_TIMEOUT_MS,
          killHung,
        );
        if (fields[2] !== "0") throw new SandboxError("file_error", blobs[0].toString("utf8").trim() || `write ${p} failed`);
      },

      async readFile(p: string, limit: number): Promise<Buffer> {
        const pb = Buffer.from(p);
        const { fields, blobs } = await ch.request("R", [limit, pb.length], [pb], AGENT_FILE_TIMEOUT_MS, killHung);
        if (fields[2] === "2")
          throw new SandboxError("limit_exceeded", `${p} is ${blobs[0].toString()} bytes; read_file returns at most ${limit}`);
        if (fields[2] !== "0") throw new SandboxError("file_error", blobs[0].toString("utf8").trim() || `read ${p} failed`);
        return blobs[0];
      },

      async destroy(): Promise<void> {
        destroyRequested = true;
        kill();
        await exited;
      },
    };
  }

  async function cleanupOrphans(): Promise<number> {
    let killed = 0;
    for (const d of abandonedDirs(vmRoot)) {
      let pid = 0;
      try {
        pid = Number(fs.readFileSync(path.join(d, "qemu.pid"), "utf8").trim());
      } catch {
        // QEMU never got far enough to write its pidfile
      }
      // Kill only a process whose command line names this VM's directory: never a recycled pid.
      if (pid > 0 && processCmdline(pid)?.includes(d)) {
        try {
          process.kill(pid, "SIGKILL");
          killed++;
        } catch {
          // exited meanwhile
        }
      }
      fs.rmSync(d, { recursive: true, force: true });
    }
    return killed;
  }

  return { kind, boot, cleanupOrphans };
}
