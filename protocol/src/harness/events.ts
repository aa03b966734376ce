// The events a run streams (docs/harness-contracts.md §4.1): `agent::events` and `agent::turn_end`.
import type { AgentMessage, AssistantMessage, AssistantMessageEvent, FunctionResultMessage } from "./messages.ts";
import type { ProviderFailoverEvent } from "./failover.ts";
import type { FunctionResult, TurnStateView } from "./turn-orchestrator.ts";

export const AGENT_EVENTS_STREAM = "agent::events";
export const TURN_END_STREAM = "agent::turn_end";

export type AgentEvent =
  | { type: "agent_start" }
  | { type: "turn_start" }
  | { type: "message_start"; message: AgentMessage }
  | { type: "message_update"; message: AgentMessage; llm_event: AssistantMessageEvent }
  | { type: "message_end"; message: AgentMessage }
  | { type: "message_complete"; message: AssistantMessage; body_streamed?: boolean }
  | { type: "function_execution_start"; function_call_id: string; function_id: string; args: unknown }
  | {
      type: "function_execution_end";
      function_call_id: string;
      function_id: string;
      result: FunctionResult;
      is_error: boolean;
      duration_ms: number;
    }
  | { type: "turn_end"; message: AgentMessage; function_results: FunctionResultMessage[] }
  | { type: "agent_end"; messages: AgentMessage[] }
  | { type: "turn_state_changed"; event_type: "state:created" | "state:updated"; new_value: TurnStateView; old_value?: TurnStateView }
  | {
      type: "compaction_done";
      mode: "async" | "sync";
      summary_text: string;
      tokens_before: number;
      compaction_entry_id: string;
      tail_start_id: string | null;
    }
  /** A round left its provider for the next fallback model (docs/harness.md, "Provider failover"). */
  | ProviderFailoverEvent;
