// The five hook trigger types of a turn (`harness::hook::<point>`, protocol/src/harness/hooks.ts).
// The turn orchestrator runs the chain: it reads the bindings (engine::registered-triggers::list,
// cached until engine::triggers-available says they changed) and calls each bound function itself,
// in-path, at its point. The types live here because that orchestrator usually runs inside the
// Worker, where a host declares functions and bindings but cannot provide a trigger type; and a
// worker-provided type would park a binding whose config is bad instead of refusing it. So the
// engine checks the config when the binding is made — a bad one is refused with
// trigger_registration_failed and nothing is bound — and never fires these bindings itself.
import { formatIssues } from "@iii-edge/protocol";
import { HOOK_POINTS, HOOK_TRIGGER_TYPES, parseHookConfig } from "@iii-edge/protocol/harness";
import type { EngineApi } from "../api.ts";

const DESCRIPTIONS = {
  pre_turn: "Called in-path at the start of an agent turn, before any model spend: may deny the turn",
  pre_generate: "Called in-path over the assembled context before each model call: may extend the system prompt, append messages, or deny",
  post_generate: "Called in-path after each assistant message, read-only",
  pre_trigger: "Called in-path before a model's function call runs (after the policy): may rewrite its arguments, deny or hold it",
  post_trigger: "Called in-path over a function call's result before the model sees it: may rewrite it",
} as const;

export function installHookPoints(core: EngineApi): void {
  for (const point of HOOK_POINTS) {
    core.addTriggerType({
      id: HOOK_TRIGGER_TYPES[point],
      description: DESCRIPTIONS[point],
      validate(config) {
        const r = parseHookConfig(point, config);
        return r.success ? undefined : `invalid config: ${formatIssues(r.error)}`;
      },
    });
  }
}
