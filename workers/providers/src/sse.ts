// Server-sent events from a fetch() body (Web streams + eventsource-parser: workerd and Node alike).
import { createParser, type EventSourceMessage } from "eventsource-parser";

export type { EventSourceMessage };

/** Bound on one SSE line/event kept in memory: a provider's largest event (a long tool-argument
 * fragment) is a few KiB; a stream without line breaks is not SSE. */
const MAX_SSE_BUFFER_CHARS = 1 << 20;

/**
 * Feed `body` to `handle` event by event until `handle` says the stream is complete (`true`) or
 * the body ends. `onBytes` runs on every chunk (the idle timer). Read errors (a cut connection, an
 * abort) propagate to the caller.
 */
export async function readEvents(
  body: ReadableStream<Uint8Array>,
  handle: (event: EventSourceMessage) => boolean,
  onBytes: () => void,
): Promise<"complete" | "ended"> {
  const queue: EventSourceMessage[] = [];
  let parseError: string | undefined;
  const parser = createParser({
    onEvent: (e) => queue.push(e),
    onError: (e) => {
      if (e.type === "max-buffer-size-exceeded") parseError = `an event-stream event larger than ${MAX_SSE_BUFFER_CHARS} characters`;
    },
    maxBufferSize: MAX_SSE_BUFFER_CHARS,
  });
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const drain = (): boolean => {
    for (let e = queue.shift(); e; e = queue.shift()) if (handle(e)) return true;
    return false;
  };
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) {
        parser.feed(decoder.decode());
        parser.reset({ consume: true });
        return drain() ? "complete" : "ended";
      }
      onBytes();
      parser.feed(decoder.decode(value, { stream: true }));
      if (drain()) return "complete";
      if (parseError) throw new Error(parseError);
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}
