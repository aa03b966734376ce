// Locates the guest artefacts (kernel + initramfs) and builds them on first use. Nothing binary is
// committed: guest/build-guest.sh downloads the Debian cloud kernel and packs the initramfs.
import { execFile } from "node:child_process";
import fs from "node:fs";
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
