// The policy worker as a Node process (`npm run worker -- policy`): the same function, with its rules
// from `III_PERMISSIONS` if set, else from the file at `III_PERMISSIONS_PATH` (default
// ./iii-permissions.yaml), reloaded when it changes. A file that fails to parse or validate is
// refused and the rules in force stay: the gate never opens because of a bad edit.
import { readFileSync, watch, type FSWatcher } from "node:fs";
import path from "node:path";
import type { WorkerModule } from "@iii-edge/sdk-edge/worker";
import { configFrom as edgeConfigFrom, registerPolicy, registerPolicyVersion, type PolicyConfig } from "./index.ts";
import { defaultPolicy, oneLine, parsePermissions, type Log, type PolicySource, type PolicyState } from "./permissions-file.ts";

export { CHECK_PERMISSIONS, POLICY_VERSION, registerPolicy, registerPolicyVersion, type PolicyConfig } from "./index.ts";

/** Quiet time after the last change event before the file is read: an editor's save is several
 * events (truncate, write, rename), and reading between them would see half a file. */
export const RELOAD_DEBOUNCE_MS = 100;
export const DEFAULT_PERMISSIONS_PATH = "./iii-permissions.yaml";

/** What one reload did. */
export type ReloadOutcome = { ok: true; rules: number; changed: boolean } | { ok: false; error: string };

export interface PermissionsWatcher extends PolicySource {
  /** Called after every reload attempt (tests wait on it instead of sleeping). */
  onReload(listener: (outcome: ReloadOutcome) => void): () => void;
  /** Read the file now (what a change event does after the debounce). */
  reload(): ReloadOutcome;
  close(): void;
}

export interface WatchOptions {
  debounceMs?: number;
  log?: Log;
}

/** The rules of `file`, kept current. At start: the file's rules; the built-in default if there is
 * no file; no rules at all (every check fails closed) if it exists but is invalid. */
export function watchPermissionsFile(file: string, options: WatchOptions = {}): PermissionsWatcher {
  const log = options.log ?? ((line: string) => console.warn(line));
  const debounceMs = options.debounceMs ?? RELOAD_DEBOUNCE_MS;
  const full = path.resolve(file);
  const listeners = new Set<(o: ReloadOutcome) => void>();
  let lastText: string | undefined;
  /** The last text refused, so one bad save is one log line however many events it makes. */
  let refusedText: string | undefined;
  let state: PolicyState;

  const read = (): string | undefined => {
    try {
      return readFileSync(full, "utf8");
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw e;
    }
  };

  const reload = (): ReloadOutcome => {
    let outcome: ReloadOutcome;
    let text: string | undefined;
    try {
      text = read();
      if (text === undefined) {
        outcome = { ok: false, error: "the file was removed" };
      } else if (text === lastText && state.ok) {
        outcome = { ok: true, rules: state.policy.rules.length, changed: false };
      } else {
        const policy = parsePermissions(text);
        for (const w of policy.warnings) log(`policy: ${full}: ${w}`);
        lastText = text;
        refusedText = undefined;
        state = { ok: true, policy, origin: full };
        outcome = { ok: true, rules: policy.rules.length, changed: true };
        log(`policy: loaded ${policy.rules.length} rules from ${full}`);
      }
    } catch (e) {
      outcome = { ok: false, error: oneLine((e as Error).message) };
    }
    if (!outcome.ok && (text === undefined || text !== refusedText)) {
      log(`policy: ${full}: ${outcome.error}; ${state.ok ? "keeping the rules in force" : "no valid rules, every check fails"}`);
    }
    if (!outcome.ok) refusedText = text;
    for (const l of listeners) l(outcome);
    return outcome;
  };

  // Initial load.
  const initial = read();
  if (initial === undefined) {
    state = { ok: true, policy: defaultPolicy(), origin: "built-in default rules" };
    log(`policy: no ${full}; using the built-in default rules until it appears`);
  } else {
    try {
      const policy = parsePermissions(initial);
      for (const w of policy.warnings) log(`policy: ${full}: ${w}`);
      lastText = initial;
      state = { ok: true, policy, origin: full };
    } catch (e) {
      refusedText = initial;
      state = { ok: false, error: `${full}: ${oneLine((e as Error).message)}`, origin: full };
      log(`policy: ${state.error}; no valid rules, every check fails until the file is fixed`);
    }
  }

  // The directory is watched, not the file: editors save by writing a new file and renaming it over
  // the old one, which ends a watch on the file itself; and a file created later is seen too.
  let timer: ReturnType<typeof setTimeout> | undefined;
  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(path.dirname(full), { persistent: false }, (_event, name) => {
      if (name !== null && name !== path.basename(full)) return;
      if (timer) clearTimeout(timer);
      timer = setTimeout(() => {
        timer = undefined;
        reload();
      }, debounceMs);
      timer.unref?.();
    });
    watcher.on("error", (e) => log(`policy: watching ${full} stopped: ${e.message}`));
  } catch (e) {
    log(`policy: cannot watch ${full} (${(e as Error).message}); its rules will not reload`);
  }

  return {
    current: () => state,
    reload,
    onReload(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    close() {
      if (timer) clearTimeout(timer);
      watcher?.close();
      listeners.clear();
    },
  };
}

/** `III_PERMISSIONS` when set (as in the Worker), else the watched file. */
export function configFrom(env: Readonly<Record<string, unknown>>): PolicyConfig {
  const text = env.III_PERMISSIONS;
  if (typeof text === "string" && text.trim() !== "") return edgeConfigFrom(env);
  const file =
    typeof env.III_PERMISSIONS_PATH === "string" && env.III_PERMISSIONS_PATH !== "" ? env.III_PERMISSIONS_PATH : DEFAULT_PERMISSIONS_PATH;
  return { source: watchPermissionsFile(file) };
}

export const worker: WorkerModule<PolicyConfig> = {
  name: "policy",
  configFrom,
  register: (iii, config) => {
    registerPolicy(iii, config);
    registerPolicyVersion(iii, config);
  },
};
export default worker;
