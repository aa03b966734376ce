// Pub/sub (wire-protocol §7.4, §7.5): `publish` fans a message out to every `subscribe` binding of
// its topic, fire-and-forget; `iii::durable::publish` turns it into one durable queue message per
// subscribed function (`durable:subscriber` bindings), with retries and dead letters.
import { IIIError } from "@iii-edge/protocol";
import { z } from "zod";
import type { EngineCore } from "../engine.ts";
import type { QueueRouter } from "../queues/router.ts";
import { installDurableSubscriber } from "../triggers/durable-subscriber.ts";
import { installSubscribe } from "../triggers/subscribe.ts";
import { parseInput } from "./input.ts";

const publishInput = z.object({ topic: z.string().max(512).optional(), data: z.unknown().optional() });

export function installPubSub(core: EngineCore, queues: QueueRouter): void {
  const subscribers = installSubscribe(core);
  const durable = installDurableSubscriber(core, queues);

  core.addBuiltin({
    id: "publish",
    description: "Publish {topic, data} to every `subscribe` trigger on the topic (fire-and-forget)",
    request_format: { type: "object", properties: { topic: { type: "string" }, data: {} }, required: ["topic"] },
    handler: (input) => {
      const { topic, data } = parseInput(publishInput, input);
      if (!topic) throw new IIIError("topic_not_set", "topic is required");
      subscribers.publish(topic, data ?? null);
      return undefined;
    },
  });

  core.addBuiltin({
    id: "iii::durable::publish",
    description: "Publish {topic, data} durably: one queued delivery per subscribed function, with retries and dead letters",
    request_format: { type: "object", properties: { topic: { type: "string" }, data: {} }, required: ["topic"] },
    handler: async (input, ctx) => {
      const { topic, data } = parseInput(publishInput, input);
      if (!topic) throw new IIIError("topic_not_set", "topic is required");
      const ids = await durable.publish(topic, data ?? null, ctx.traceparent);
      // iii returns nothing; the receipts are an iii-edge addition (ignored by iii clients).
      return { messageReceiptIds: ids };
    },
  });
}
