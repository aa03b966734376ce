import type { ChildProcess } from "node:child_process";
import { expect } from "vitest";

/**
 * Wait for `npm run …` (started detached, signalled as a group) to end after SIGTERM, and check it
 * ended cleanly: npm exits 0, or ends by the signal itself once its script is gone — both are a
 * clean stop, depending on which of them saw the signal first.
 */
export async function expectStoppedBySigterm(child: ChildProcess): Promise<void> {
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve({ code: child.exitCode, signal: child.signalCode });
    else child.once("exit", (code, signal) => resolve({ code, signal }));
  });
  process.kill(-child.pid!, "SIGTERM");
  expect([
    { code: 0, signal: null },
    { code: null, signal: "SIGTERM" },
  ]).toContainEqual(await exited);
}
