// Locates the guest artefacts (kernel + initramfs) and builds them on first use. Nothing binary is
// committed: guest/build-guest.sh downloads the Debian cloud kernel and packs the initramfs.
import { execFile } from "node:child_process";
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const GUEST_SRC_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../guest");
export const DEFAULT_GUEST_DIR = path.join(GUEST_SRC_DIR, "out");

export interface GuestArtefacts {
  kernel: string;
  initrd: string;
}

function mtime(p: string): number {
  try {
    return fs.statSync(p).mtimeMs;
  } catch {
    return 0;
  }
}

/** True when the build output is missing or older than the guest sources. */
export function guestStale(dir: string = DEFAULT_GUEST_DIR): boolean {
  const initrd = mtime(path.join(dir, "initrd.gz"));
  if (!initrd || !mtime(path.join(dir, "vmlinux"))) return true;
  return dir === DEFAULT_GUEST_DIR && ["init", "agent.sh"].some((f) => mtime(path.join(GUEST_SRC_DIR, f)) > initrd);
}

/** Build the guest if needed (about 3 s plus a 27 MB kernel download the first time). */
export async function ensureGuest(dir: string = DEFAULT_GUEST_DIR, log: (m: string) => void = () => {}): Promise<GuestArtefacts> {
  if (guestStale(dir)) {
    log(`building the sandbox guest into ${dir}`);
    await new Promise<void>((resolve, reject) => {
      execFile("sh", [path.join(GUEST_SRC_DIR, "build-guest.sh"), dir], { maxBuffer: 1 << 20 }, (err, _out, stderr) => {
        if (err) reject(new Error(`guest build failed: ${stderr.trim() || err.message}`));
        else resolve();
      });
    });
  }
  return { kernel: path.join(dir, "vmlinux"), initrd: path.join(dir, "initrd.gz") };
}

// ---------------------------------------------------------------- the worker image

const WORKER_SRC_DIR = path.join(GUEST_SRC_DIR, "worker");
export const WORKER_INITRD = "initrd-worker.cpio";

/** What the worker layer is built from: the project's own Node 22, esbuild and iii-sdk. */
export function workerLayerInputs(): { node: string; esbuild: string; iiiSdk: string } {
  const require = createRequire(import.meta.url);
  const nodePkg = path.dirname(require.resolve("node/package.json"));
  const esbuildPkg = path.dirname(require.resolve("esbuild/package.json"));
  return {
    node: path.join(nodePkg, "bin", "node"),
    esbuild: path.join(esbuildPkg, "bin", "esbuild"),
    iiiSdk: path.dirname(path.dirname(require.resolve("iii-sdk"))),
  };
}

/** True when initrd-worker.cpio is missing or older than the base initramfs or its sources. */
export function workerGuestStale(dir: string = DEFAULT_GUEST_DIR): boolean {
  const built = mtime(path.join(dir, WORKER_INITRD));
  if (!built) return true;
  const sources = [
    path.join(dir, "initrd.gz"),
    ...["runtime.mjs", "loader.mjs", "build-worker-layer.sh"].map((f) => path.join(WORKER_SRC_DIR, f)),
  ];
  return sources.some((f) => mtime(f) > built);
}

/** The base guest plus the worker layer (about 1 s once the base exists). */
export async function ensureWorkerGuest(dir: string = DEFAULT_GUEST_DIR, log: (m: string) => void = () => {}): Promise<GuestArtefacts> {
  const base = await ensureGuest(dir, log);
  if (workerGuestStale(dir)) {
    log(`building the sandbox worker guest into ${dir}`);
    const i = workerLayerInputs();
    await new Promise<void>((resolve, reject) => {
      execFile(
        "sh",
        [path.join(WORKER_SRC_DIR, "build-worker-layer.sh"), dir, i.node, i.esbuild, i.iiiSdk],
        { maxBuffer: 1 << 20 },
        (err, _out, stderr) => {
          if (err) reject(new Error(`worker guest build failed: ${stderr.trim() || err.message}`));
          else resolve();
        },
      );
    });
  }
  return { kernel: base.kernel, initrd: path.join(dir, WORKER_INITRD) };
}
