// The orchestrator's state scopes are its own (docs/harness-contracts.md §1.2 "Owned state"):
// another package that read or bound a trigger on them would break when the orchestrator is
// replaced, which is configuration. Every package's sources and tests but the orchestrator's own
// are read here, comments left out, for the ways a scope gets named: `scope: "<name>"`, a constant
// holding the name, or a `<name>/<key>` path.
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { SCOPE_EVENT_COUNTER, SCOPE_IDEMPOTENCY, SCOPE_RUN_REQUEST, SCOPE_SUBSCRIPTIONS, SCOPE_TURN_STATE } from "../src/constants.ts";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const OWN = path.join(root, "workers", "turn-orchestrator");
/** Its scopes no one else writes. (`session_index` is still read by the harness ingress's trigger,
 * and `approvals` is the approval flow's: workers/README.md "Who owns which state".) */
const SCOPES = [SCOPE_TURN_STATE, SCOPE_RUN_REQUEST, SCOPE_EVENT_COUNTER, SCOPE_SUBSCRIPTIONS, SCOPE_IDEMPOTENCY];
/** The folders of a package that hold code: its sources, its tests, the console's Worker side. */
const CODE_DIRS = ["src", "test", "edge"];
const SKIP = new Set(["node_modules", "dist", ".wrangler"]);

function packages(): string[] {
  const { workspaces } = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")) as { workspaces: string[] };
  return workspaces.map((w) => path.join(root, w)).filter((dir) => dir !== OWN);
}

function* codeFiles(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    if (SKIP.has(name)) continue;
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) yield* codeFiles(p);
    else if (/\.(ts|tsx|mts|js|mjs)$/.test(name)) yield p;
  }
}

/** The code without its comments (a doc comment may say where the orchestrator keeps a record). */
const withoutComments = (text: string): string => text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:])\/\/.*$/gm, "$1");

/** Ways the code of another package could name one of the scopes. */
function namings(code: string, scope: string): string[] {
  const q = `["'\`]`;
  const patterns = [
    new RegExp(`scope\\s*:\\s*${q}${scope}${q}`, "g"), // scope: "turn_state"
    new RegExp(`=\\s*${q}${scope}${q}`, "g"), // const SCOPE = "turn_state"
    new RegExp(`${q}${scope}/`, "g"), // "turn_state/<sid>"
  ];
  return patterns.flatMap((re) => code.match(re) ?? []);
}

describe("the orchestrator's state has one owner", () => {
  it("finds the namings it looks for (the check can fail)", () => {
    const code = withoutComments(`// turn_state is read through run::status
      const SCOPE = "turn_state";
      call("state::get", { scope: 'run_request', key: sid });
      const path = \`turn_state/\${sid}\`;
      type T = Req["run_request"];`);
    expect(namings(code, "turn_state")).toHaveLength(2);
    expect(namings(code, "run_request")).toHaveLength(1);
  });

  it("no other package's code names the orchestrator's scopes", () => {
    const offenders: string[] = [];
    const dirs = packages();
    expect(dirs.length).toBeGreaterThan(10);
    for (const pkg of dirs) {
      for (const sub of CODE_DIRS) {
        const dir = path.join(pkg, sub);
        if (!statSync(dir, { throwIfNoEntry: false })?.isDirectory()) continue;
        for (const file of codeFiles(dir)) {
          const code = withoutComments(readFileSync(file, "utf8"));
          for (const scope of SCOPES)
            for (const hit of namings(code, scope))
              offenders.push(`${path.relative(root, file)}: ${hit} (use run::status, run::request or turn::subscribe)`);
        }
      }
    }
    expect(offenders).toEqual([]);
  });
});
