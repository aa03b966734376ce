// Pub/sub (protocol/README.md §7.4, §7.5): `publish` fans a message out to every `subscribe`
// binding of its topic, fire-and-forget; `iii::durable::publish` turns it into one durable queue
// message per subscribed function (`durable:subscriber` bindings), with retries and dead letters.
// Inputs and results: protocol's BUILTINS.
import { IIIError } from "@iii-edge/protocol";
import type { EngineApi } from "../api.ts";
import type { QueueRouter } from "../queues/router.ts";
import { installDurableSubscriber } from "../triggers/durable-subscriber.ts";
import { installSubscribe } from "../triggers/subscribe.ts";
import { defineBuiltin } from "./define.ts";

export function installPubSub(core: EngineApi, queues: QueueRouter): void {
  const subscribers = installSubscribe(core);
  const durable = installDurableSubscriber(core, queues);

  defineBuiltin(core, "publish", {
    description: "Publish {topic, data} to every `subscribe` trigger on the topic (fire-and-forget)",
    handler: ({ topic, data }, ctx) => {
      if (!topic) throw new IIIError("topic_not_set", "topic is required");
      subscribers.publish(topic, data ?? null, ctx);
      return undefined;
    },
  });

  defineBuiltin(core, "iii::durable::publish", {
    description: "Publish {topic, data} durably: one queued delivery per subscribed function, with retries and dead letters",
    handler: async ({ topic, data }, ctx) => {
      if (!topic) throw new IIIError("topic_not_set", "topic is required");
      const ids = await durable.publish(topic, data ?? null, ctx);
      // iii returns nothing; the receipts are an iii-edge addition (ignored by iii clients).
      return { messageReceiptIds: ids };
    },
  });
}
