// The provisioning worker's contracts (docs/harness-contracts.md §1.3, §6.5): `provisioning::*`.
import { z } from "zod";
import { AGENT_TRIGGER, type AgentFunction, agentFunctionSchema } from "./messages.ts";
import { modelSchema } from "./providers.ts";
import { MODES } from "./turn-orchestrator.ts";

/** The schema of the one provider tool (§3.1): every run request carries exactly this. */
export const AGENT_TRIGGER_FUNCTION: AgentFunction = {
  name: AGENT_TRIGGER,
  description:
    "Call any iii function by its id. `function` is the function id (for example `state::get`); `payload` is that function's request object. Returns the function's result.",
  parameters: {
    type: "object",
    properties: {
      function: { type: "string", description: "The id of the function to call, e.g. `engine::functions::list`." },
      payload: { type: "object", description: "The function's request, as its request schema describes." },
    },
    required: ["function"],
  },
  label: AGENT_TRIGGER,
  execution_mode: "parallel",
  prepare_arguments_supported: false,
};

/** `provisioning::prepare`: the stored run request is read leniently (fields it does not use pass). */
export const provisioningPrepareRequest = z.object({
  session_id: z.string().min(1).max(128),
  run_request: z.looseObject({
    provider: z.string().min(1).max(64).optional(),
    model: z.string().min(1).max(200),
    mode: z.enum(MODES).nullable().optional(),
    system_prompt: z.string().max(200_000).nullable().optional(),
    skills: z.array(z.string().min(1).max(500)).max(50).optional(),
    isolation: z.boolean().optional(),
    sandbox_id: z.string().min(1).max(200).nullable().optional(),
  }),
});
export type ProvisioningPrepareRequest = z.infer<typeof provisioningPrepareRequest>;
export const provisioningPrepareResponse = z.object({
  system_prompt: z.string(),
  function_schemas: z.array(agentFunctionSchema),
  /** The catalog's entry for the run's model as `models::get` answered it (fields past modelSchema's
   * pass through); null or absent when the catalog does not know it. */
  model_meta: modelSchema.loose().nullable().optional(),
  /** Present when the run asked for isolation: the sandbox its calls use. */
  sandbox_id: z.string().min(1).optional(),
});
export type ProvisioningPrepareResponse = z.infer<typeof provisioningPrepareResponse>;
export const provisioningReleaseRequest = z.object({
  session_id: z.string().min(1).max(128),
  sandbox_id: z.string().min(1).max(200).nullable().optional(),
});
export const provisioningReleaseResponse = z.object({ ok: z.literal(true) });
