// Messages and the provider's stream events (docs/harness-contracts.md §4.2, §4.4): what every harness
// worker and UI reads. Field names are snake_case, the names iii's own harness uses.
import { z } from "zod";

export type StopReason = "end" | "length" | "function_call" | "aborted" | "error";
export type ErrorKind = "auth_expired" | "rate_limited" | "context_overflow" | "transient" | "permanent";
export const STOP_REASONS = ["end", "length", "function_call", "aborted", "error"] as const;
export const ERROR_KINDS = ["auth_expired", "rate_limited", "context_overflow", "transient", "permanent"] as const;

export type ContentBlock =
  | { type: "text"; text: string }
  | { type: "image"; mime: string; data: string }
  | { type: "thinking"; text: string; signature?: unknown }
  | { type: "function_call"; id: string; function_id: string; arguments: unknown }
  | { type: "function_result"; function_call_id: string; content: ContentBlock[]; is_error?: boolean };

/** Token counts as the provider reported them. */
export interface Usage {
  input?: number;
  output?: number;
  cache_read?: number;
  cache_write?: number;
  reasoning?: number;
  cost_usd?: number;
}

export interface UserMessage {
  role: "user";
  content: ContentBlock[];
  timestamp: number;
}
export interface AssistantMessage {
  role: "assistant";
  content: ContentBlock[];
  stop_reason: StopReason;
  error_message?: string | null;
  error_kind?: ErrorKind | null;
  usage?: Usage | null;
  model: string;
  provider: string;
  timestamp: number;
}
export interface FunctionResultMessage {
  role: "function_result";
  function_call_id: string;
  function_id: string;
  content: ContentBlock[];
  details: unknown;
  is_error: boolean;
  timestamp: number;
  /** How the harness decided the call; absent on results stored before it was kept. */
  gate?: CallGate;
}

/** How the harness decided one call, stored with its result so a finished turn can be exported as a
 * cassette and replayed against a changed policy (docs/cassettes.md). Providers never send it. */
export interface CallGate {
  /** The policy's answer under the session's permission settings; `none`: the call was settled
   * before the policy was asked (a malformed call, a stop before it ran). */
  policy: "allow" | "deny" | "needs_approval" | "none";
  /** The rules' version the policy answered under (`policy::version`). */
  policy_version?: string;
  /** A person's decision on a call that waited for one. */
  approval?: "allow" | "deny" | "aborted" | "expired";
}
export interface CustomMessage {
  role: "custom";
  custom_type: string;
  content: unknown;
  display?: string;
  details?: unknown;
  timestamp: number;
}
export type AgentMessage = UserMessage | AssistantMessage | FunctionResultMessage | CustomMessage;

/** A function schema as a provider tool (§4.4 AgentFunction). */
export const agentFunctionSchema = z.object({
  name: z.string(),
  description: z.string(),
  parameters: z.unknown(),
  label: z.string().optional(),
  execution_mode: z.enum(["parallel", "sequential"]).optional(),
  prepare_arguments_supported: z.boolean().optional(),
});
export type AgentFunction = z.infer<typeof agentFunctionSchema>;

/** The one tool the model sees (§3.1): `{function, payload}` reaches any function by id. */
export const AGENT_TRIGGER = "agent_trigger";

// Lenient input schemas: a message from a client is checked for its discriminating fields; its
// content blocks are kept as given (providers convert them, unknown blocks are dropped there).
const contentBlock = z.looseObject({ type: z.string().min(1) });
/** A message in a response: stored messages are passed through as written, so a response schema
 * names the type without checking every content block again. */
export const agentMessageValue = z.custom<AgentMessage>();

export const agentMessageSchema = z.union([
  z.looseObject({ role: z.literal("user"), content: z.union([z.string(), z.array(contentBlock)]), timestamp: z.number().optional() }),
  z.looseObject({ role: z.literal("assistant"), content: z.array(contentBlock) }),
  z.looseObject({ role: z.literal("function_result"), function_call_id: z.string(), content: z.array(contentBlock) }),
  z.looseObject({ role: z.literal("custom"), custom_type: z.string() }),
]);

// Provider streaming (§4.2): the events a provider writes into its channel, one JSON text each.

export type AssistantMessageEvent =
  | { type: "start"; partial: AssistantMessage }
  | { type: "text_start"; partial: AssistantMessage }
  | { type: "text_delta"; partial: AssistantMessage; delta: string }
  | { type: "text_end"; partial: AssistantMessage }
  | { type: "thinking_start"; partial: AssistantMessage }
  | { type: "thinking_delta"; partial: AssistantMessage; delta: string }
  | { type: "thinking_end"; partial: AssistantMessage }
  | { type: "functioncall_start"; partial: AssistantMessage }
  | { type: "functioncall_delta"; partial: AssistantMessage; delta: string }
  | { type: "functioncall_end"; partial: AssistantMessage }
  | { type: "usage"; usage: Usage }
  | { type: "stop"; stop_reason: StopReason; error_message?: string; error_kind?: ErrorKind }
  | { type: "ping" }
  | { type: "done"; message: AssistantMessage }
  | { type: "error"; error: AssistantMessage };
