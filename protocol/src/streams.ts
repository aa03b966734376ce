// Browser stream subscriptions (protocol/README.md §8.6): the messages of a stream socket
// (`/_iii/streams`, `/ns/<ns>/_iii/streams`). The browser sends `join` / `leave`; the engine answers
// a join with `sync` (or `unauthorized`), then pushes every change of the subscribed group
// (`create` / `update` / `delete`, custom `event`s). Stream changes reach `stream` triggers in the
// same shape; `stream:join` / `stream:leave` bindings get `StreamSubscriptionPayload`.
import { z } from "zod";

/** A stream, group or item name (stream::* inputs too). */
export const streamName = z.string().min(1).max(512);

/** Browser → engine. */
export const streamSocketMessage = z.object({
  type: z.enum(["join", "leave"]),
  data: z.object({ subscriptionId: z.string().min(1).max(256), streamName, groupId: streamName, id: streamName.nullish() }),
});
export type StreamSocketMessage = z.infer<typeof streamSocketMessage>;

export type StreamChangeType = "create" | "update" | "delete";
/** What happened to a group: an item changed, or a custom event (`stream::send`). */
export type StreamChange = { type: StreamChangeType; data: unknown } | { type: "event"; event: { type: string; data: unknown } };

/** A `stream` trigger's payload. */
export interface StreamTriggerPayload {
  type: "stream";
  timestamp: number;
  streamName: string;
  groupId: string;
  /** The item, or null for a custom event sent to the whole group. */
  id: string | null;
  event: StreamChange;
}

/** Engine → browser: a change pushed, or the answer to a join (`sync`: the item, or the group's
 * items as an array; `unauthorized`: refused, by a `stream:join` binding or a bound). */
export interface StreamSocketPush extends Omit<StreamTriggerPayload, "event"> {
  event: StreamChange | { type: "sync"; data: unknown } | { type: "unauthorized"; data?: unknown };
}

/** What `stream:join` and `stream:leave` bindings get. */
export interface StreamSubscriptionPayload {
  subscription_id: string;
  stream_name: string;
  group_id: string;
  id?: string;
}
