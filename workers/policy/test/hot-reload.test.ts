// The Node worker's permissions file, reloaded when it changes: a bad edit keeps the rules in force
// (the gate never opens on a broken file), a good one takes over. Waits on the reload events the
// watcher reports, never on a fixed sleep.
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { eventually } from "@iii-edge/test-support/wait";
import { watchPermissionsFile, type PermissionsWatcher, type ReloadOutcome } from "../src/node.ts";
import { evaluate } from "../src/rules.ts";

const GOOD_V1 = "version: 1\nrules:\n  - '!shell::exec'\n  - state::get\n";
const GOOD_V2 = "version: 1\nrules:\n  - shell::exec\n";
const BAD_YAML = "version: 1\nrules:\n  - !shell::exec\n"; // unquoted '!': a YAML tag
const BAD_RULE = "version: 1\nrules:\n  - function: shell::exec\n    action: perhaps\n";

let watcher: PermissionsWatcher | undefined;
afterEach(() => watcher?.close());

function setup(initial?: string) {
  const dir = mkdtempSync(path.join(tmpdir(), "iii-permissions-"));
  const file = path.join(dir, "iii-permissions.yaml");
  if (initial !== undefined) writeFileSync(file, initial);
  const logs: string[] = [];
  const outcomes: ReloadOutcome[] = [];
  watcher = watchPermissionsFile(file, { debounceMs: 20, log: (l) => logs.push(l) });
  watcher.onReload((o) => outcomes.push(o));
  const decide = (fn: string) => {
    const s = watcher!.current();
    return s.ok ? evaluate(s.policy, fn, {}).decision : "unavailable";
  };
  /** Wait for the next reload with this outcome after `n` earlier ones. */
  const next = (ok: boolean, after: number) =>
    eventually(() => outcomes.slice(after).find((o) => o.ok === ok), 10_000, `a reload with ok=${ok}`);
  return { dir, file, logs, outcomes, decide, next };
}

describe("hot reload of iii-permissions.yaml", () => {
  it("a bad file keeps the previous rules and logs one line; a good file then applies", async () => {
    const t = setup(GOOD_V1);
    expect(t.decide("shell::exec")).toBe("deny");

    let seen = t.outcomes.length;
    writeFileSync(t.file, BAD_YAML);
    const bad = await t.next(false, seen);
    expect(bad).toMatchObject({ ok: false, error: expect.stringMatching(/quote/) });
    expect(t.decide("shell::exec")).toBe("deny");
    expect(t.decide("state::get")).toBe("allow");
    const lines = t.logs.filter((l) => l.includes("keeping the rules in force"));
    expect(lines.length).toBeGreaterThanOrEqual(1);
    expect(lines.every((l) => !l.includes("\n"))).toBe(true);

    seen = t.outcomes.length;
    writeFileSync(t.file, BAD_RULE);
    expect(await t.next(false, seen)).toMatchObject({ error: expect.stringMatching(/rules\[0\]/) });
    expect(t.decide("shell::exec")).toBe("deny");

    seen = t.outcomes.length;
    writeFileSync(t.file, GOOD_V2);
    await t.next(true, seen);
    await eventually(() => t.decide("shell::exec") === "allow", 10_000, "the new rules");
    expect(t.decide("state::get")).toBe("needs_approval");
  });

  it("an editor's save (write a temp file, rename over) is picked up", async () => {
    const t = setup(GOOD_V1);
    const seen = t.outcomes.length;
    const tmp = path.join(t.dir, ".iii-permissions.yaml.swp");
    writeFileSync(tmp, GOOD_V2);
    renameSync(tmp, t.file);
    await t.next(true, seen);
    await eventually(() => t.decide("shell::exec") === "allow", 10_000, "the renamed file's rules");
  });

  it("a removed file keeps the rules in force", async () => {
    const t = setup(GOOD_V1);
    const seen = t.outcomes.length;
    rmSync(t.file);
    expect(await t.next(false, seen)).toMatchObject({ error: expect.stringMatching(/removed/) });
    expect(t.decide("shell::exec")).toBe("deny");
  });

  it("no file: the built-in rules, until one appears", async () => {
    const t = setup();
    expect(t.decide("harness::spawn")).toBe("allow");
    expect(t.decide("state::get")).toBe("allow");
    const seen = t.outcomes.length;
    writeFileSync(t.file, GOOD_V2);
    await t.next(true, seen);
    expect(t.decide("shell::exec")).toBe("allow");
    expect(t.decide("harness::spawn")).toBe("needs_approval");
  });

  it("a file that is bad from the start leaves no rules (every check fails) until it is fixed", async () => {
    const t = setup(BAD_YAML);
    expect(t.decide("state::get")).toBe("unavailable");
    expect(t.logs.some((l) => l.includes("no valid rules"))).toBe(true);
    const seen = t.outcomes.length;
    writeFileSync(t.file, GOOD_V1);
    await t.next(true, seen);
    expect(t.decide("state::get")).toBe("allow");
  });
});
