// The hook-fanout worker (docs/harness-contracts.md §1.10, §6.3): generic publish-and-collect.
// `publish_collect` mints an event id, publishes `{event_id, reply_stream, payload}` to the topic's
// durable subscribers (`iii::durable::publish`), and collects their replies — written with
// `stream::set` on `agent::hook_reply`, group = event id — through a `stream` trigger that routes
// each reply to the waiting collector in this process (collector.ts), never by polling. It resolves
// on the expected replies (by default: as many as the publish reached), quiescence or the deadline,
// reads the group once more unless every expected reply already came (a reply whose trigger reached
// another process or isolate, or was lost, is still counted), merges by the request's rule, and
// deletes the replies it read. Runs unchanged inside the Worker and in Node.
import {
  HOOK_MAX_REPLIES,
  HOOK_REPLY_STREAM,
  PUBLISH_COLLECT,
  publishCollectRequest,
  type HookEnvelope,
  type HookResolution,
  type PublishCollectResponse,
  publishCollectResponse,
} from "@iii-edge/protocol/harness";
import type { WorkerModule, WorkerSurface } from "@iii-edge/sdk-edge/worker";
import { z } from "zod";
import { Collectors } from "./collector.ts";
import { merge } from "./merge.ts";
import { errorCode, errorText, responseFormat } from "@iii-edge/protocol";
import type { Trigger } from "@iii-edge/sdk-edge/worker";

export { fieldMerge, firstBlockWins, merge, parseMergeRule, pipelineLastWins } from "./merge.ts";
export { Collectors, ReplyCollector } from "./collector.ts";

export const ON_REPLY = "hook-fanout::on_reply";
/** A stream read or delete of the reply group: one small local engine call. */
export const ENGINE_CALL_TIMEOUT_MS = 5_000;
/** Longest error text a response carries. */
const MAX_ERROR_TEXT = 500;

type Request = z.output<typeof publishCollectRequest>;

/** "code: message", as a subscriber's failure is reported to the publisher. */
const failureText = (e: unknown): string => {
  const code = errorCode(e);
  return `${code ? `${code}: ` : ""}${errorText(e, MAX_ERROR_TEXT)}`.slice(0, MAX_ERROR_TEXT);
};

/** What the `stream` trigger delivers (protocol/README.md §8.6); anything else is ignored. */
const streamFire = z.object({
  groupId: z.string().min(1),
  id: z.string().min(1).nullable(),
  event: z.object({ type: z.string(), data: z.unknown().optional() }),
});

/** The items of the reply group (one page: a collector never holds more than HOOK_MAX_REPLIES). */
async function readReplies(trigger: Trigger, eventId: string): Promise<{ item_id: string; data: unknown }[]> {
  const page = await trigger<unknown, { items?: { item_id: string; data: unknown }[] }>({
    function_id: "stream::list_items",
    payload: { stream_name: HOOK_REPLY_STREAM, group_id: eventId, limit: HOOK_MAX_REPLIES },
    timeoutMs: ENGINE_CALL_TIMEOUT_MS,
  });
  return Array.isArray(page?.items) ? page.items : [];
}

async function deleteReply(trigger: Trigger, eventId: string, itemId: string): Promise<void> {
  try {
    await trigger({
      function_id: "stream::delete",
      payload: { stream_name: HOOK_REPLY_STREAM, group_id: eventId, item_id: itemId },
      timeoutMs: ENGINE_CALL_TIMEOUT_MS,
    });
  } catch (e) {
    console.warn(`hook-fanout: deleting reply ${eventId}/${itemId} failed (ignored): ${failureText(e)}`);
  }
}

/** One publish-and-collect. `now` is injectable for tests. */
export async function publishCollect(
  trigger: Trigger,
  collectors: Collectors,
  req: Request,
  now: () => number = Date.now,
): Promise<PublishCollectResponse> {
  const started = now();
  const eventId = crypto.randomUUID();
  const envelope: HookEnvelope = { event_id: eventId, reply_stream: HOOK_REPLY_STREAM, payload: req.payload ?? null };
  // Open before publishing: a subscriber may answer before the publish call has returned.
  const collector = collectors.open(eventId);
  try {
    let subscribers: number | undefined;
    try {
      const out = await trigger<unknown, { messageReceiptIds?: unknown } | undefined>({
        function_id: "iii::durable::publish",
        payload: { topic: req.topic, data: envelope },
        timeoutMs: req.timeout_ms,
      });
      // iii-edge answers the receipts, one per subscribed function reached; iii answers nothing.
      subscribers = Array.isArray(out?.messageReceiptIds) ? out.messageReceiptIds.length : undefined;
    } catch (e) {
      const error = failureText(e);
      return {
        event_id: eventId,
        replies: [],
        merged: merge(req.merge_rule, req.payload, []),
        publish: { ok: false, error },
        publish_failed: true,
        resolved_by: "publish_failed",
        elapsed_ms: now() - started,
      };
    }
    let resolvedBy: HookResolution;
    if (subscribers === 0) {
      resolvedBy = "no_subscribers";
    } else {
      const expected = req.expected_replies ?? subscribers;
      resolvedBy = await collector.wait(expected, req.quiescence_ms, req.timeout_ms - (now() - started));
      if (resolvedBy !== "expected") {
        // The replies this process's trigger did not bring (delivered to another process or
        // isolate, or lost: stream triggers are best effort), read once.
        try {
          for (const item of await readReplies(trigger, eventId)) collector.add(item.item_id, item.data);
        } catch (e) {
          console.warn(
            `hook-fanout: reading the replies of ${eventId} failed (using the ${collector.replies.size} delivered): ${failureText(e)}`,
          );
        }
      }
    }
    const replies = [...collector.replies.values()];
    await Promise.all([...collector.replies.keys()].map((itemId) => deleteReply(trigger, eventId, itemId)));
    return {
      event_id: eventId,
      replies,
      merged: merge(req.merge_rule, req.payload, replies),
      publish: { ok: true, subscribers: subscribers ?? replies.length },
      resolved_by: resolvedBy,
      elapsed_ms: now() - started,
    };
  } finally {
    collectors.close(eventId);
  }
}

export function registerHookFanout(iii: WorkerSurface): Collectors {
  const collectors = new Collectors();
  iii.registerFunction(PUBLISH_COLLECT, (data: Request, ctx) => publishCollect(ctx.trigger as Trigger, collectors, data), {
    description:
      "Publish {topic, payload} to the topic's durable subscribers and collect their replies (stream agent::hook_reply, group event_id): " +
      "{topic, payload, merge_rule: first_block_wins|field_merge|pipeline_last_wins, timeout_ms?, expected_replies?, quiescence_ms?} → {event_id, replies, merged, publish, publish_failed?, resolved_by, elapsed_ms}",
    input: publishCollectRequest,
    response_format: responseFormat(publishCollectResponse),
  });
  iii.registerFunction(
    ON_REPLY,
    async (data: unknown, ctx) => {
      const fire = streamFire.safeParse(data);
      if (!fire.success || fire.data.id === null) return null;
      const { groupId, id, event } = fire.data;
      if (event.type !== "create" && event.type !== "update") return null;
      if (collectors.deliver(groupId, id, event.data ?? null) === "late") await deleteReply(ctx.trigger as Trigger, groupId, id);
      return null;
    },
    {
      description: "Stream trigger handler (agent::hook_reply): routes a hook reply to the collector waiting for its event",
      metadata: { internal: true },
    },
  );
  iii.registerTrigger({ type: "stream", function_id: ON_REPLY, config: { stream_name: HOOK_REPLY_STREAM } });
  return collectors;
}

export const worker: WorkerModule = {
  name: "hook-fanout",
  kernel: true,
  register(iii) {
    registerHookFanout(iii);
  },
};
export default worker;
