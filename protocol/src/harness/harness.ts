// The harness worker's contracts (docs/harness-contracts.md §1.1): `harness::trigger` and the
// `agent::sessions` stream a console joins.
import { z } from "zod";

export const harnessTriggerRequest = z.object({
  session_id: z.string().optional(),
  message_id: z.string().optional(),
  payload: z.unknown(),
});

/** Stream a console joins (group `all`) to see new sessions: one item per session, id = session id. */
export const AGENT_SESSIONS_STREAM = "agent::sessions";
export const AGENT_SESSIONS_GROUP = "all";
/** An `agent::sessions` item. */
export interface SessionsChanged {
  added: string[];
}
