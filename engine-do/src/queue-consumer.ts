// The Worker's queue() handler for the `iii-deliveries` Cloudflare Queue: each message goes back to
// the Engine object of its namespace, which invokes the target and answers ack or retry (with the
// queue's exponential backoff); past max_retries the object dead-letters it in D1 and acks.
import { CLOUDFLARE_MAX_RETRIES } from "./core/queues/config.ts";
import { isCloudMessageBody } from "./core/queues/cloudflare-queue.ts";

/** Delay before retrying a message whose engine object could not be reached. */
const UNREACHABLE_RETRY_S = 5;

export async function consumeDeliveries(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  await Promise.all(
    batch.messages.map(async (msg) => {
      const body = msg.body;
      if (!isCloudMessageBody(body)) {
        // Not ours (or from an incompatible version): nothing could ever deliver it.
        console.warn(JSON.stringify({ level: "warn", msg: "dropping a delivery with an unknown shape", id: msg.id }));
        msg.ack();
        return;
      }
      try {
        const verdict = await env.ENGINE.getByName(body.ns).deliverQueued(body, msg.attempts);
        if (verdict.ack) msg.ack();
        else msg.retry({ delaySeconds: verdict.delaySeconds });
      } catch (e) {
        // The object itself failed (reset, overload). Cloudflare drops a message after the
        // consumer's max_retries, so the last attempt is written to D1 here instead.
        if (msg.attempts > CLOUDFLARE_MAX_RETRIES) {
          await env.DB.prepare(
            "INSERT OR REPLACE INTO dead_letters (id, namespace, queue, function_id, data, attempts, last_error, enqueued_at, failed_at, traceparent) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
          )
            .bind(
              body.id,
              body.ns,
              body.queue,
              body.function_id,
              JSON.stringify(body.data ?? null),
              msg.attempts,
              `invocation_error: ${String(e)}`,
              body.enqueued_at,
              Date.now(),
              body.traceparent ?? null,
            )
            .run();
          msg.ack();
          return;
        }
        msg.retry({ delaySeconds: UNREACHABLE_RETRY_S });
      }
    }),
  );
}
