// Builds the guest (kernel + initramfs) once before any test boots a VM, as the host does lazily
// on its first start. Without QEMU there is nothing to build; the VM tests then skip and say so.
// Test state directories go under one temporary root that teardown removes.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { ensureWorkerGuest } from "../src/guest.ts";
import { which } from "../src/probe.ts";

export default async function setup(): Promise<() => void> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "sbx-tests-"));
  process.env.SBX_TEST_ROOT = root; // inherited by the test workers
  const teardown = () => fs.rmSync(root, { recursive: true, force: true });
  if (!which("qemu-system-x86_64")) {
    console.warn(
      "[sandbox tests] qemu-system-x86_64 not installed: microVM tests will be skipped (run workers/sandbox-host/scripts/install-deps.sh)",
    );
    return teardown;
  }
  // The worker image (sandbox::spawn_worker) includes the base guest.
  await ensureWorkerGuest(undefined, (m) => console.log(`[sandbox tests] ${m}`));
  return teardown;
}
