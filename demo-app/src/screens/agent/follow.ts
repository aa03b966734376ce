// Following one session's `agent::events` from a tab (workers/harness/README.md, "Following a
// turn"): the engine's browser stream socket (`/_iii/streams`) pushes each event as it is written;
// `run::events {after}` — called through the tab's own worker connection — catches up on what came
// before the join or during a drop, so nothing is lost or shown twice (item ids of one session sort
// by sequence). Pushes are handed to the screen once per animation frame, in batches, so a turn
// streaming a thousand deltas costs a thousand cheap array pushes and one render per frame.
import type { AgentEvent, RunEventsResponse, SubAgentChildEvent } from "@iii-edge/protocol/harness";
import type { BrowserClient } from "@iii-edge/sdk-browser";
import { streamTarget } from "./stream-target.ts";

export type EventItem = { item_id: string; data: AgentEvent };

/** Items one `run::events` page asks for: the harness's own maximum (RUN_EVENTS_MAX_LIMIT). */
export const EVENTS_PAGE = 1_000;
/** Pages one catch-up reads before handing what it has to the screen and going on: a session with
 * a very long history still shows its first events promptly. */
const CATCH_UP_PAGES_PER_BATCH = 4;
/** Wait before re-opening a dropped stream socket (the engine restarting, a network blip). */
export const STREAM_RETRY_MS = 1_000;
/** Poll intervals when the stream socket cannot be used (a proxy that refuses WebSockets; an
 * engine whose stream socket does not answer the token subprotocol): the console stays correct,
 * only less immediate — 4 reads a second while events keep coming, 1 when nothing does. */
export const POLL_ACTIVE_MS = 250;
export const POLL_IDLE_MS = 1_000;
/** A stream socket not open after this long is dropped and dialled again (a handshake lost on
 * the way, an engine restarting). */
export const SOCKET_OPEN_TIMEOUT_MS = 5_000;
/** Deadline of one catch-up page: a page is a read of stored items, answered in milliseconds; one
 * that hangs (the engine restarting under it) is retried by re-dialling, not waited on for the
 * client's default 30 s. */
export const CATCH_UP_TIMEOUT_MS = 10_000;
/** Socket failures in a row after which the follower polls instead of re-dialling. */
const SOCKET_FAILURES_BEFORE_POLLING = 2;
/** While polling, the stream socket is tried again this often; once it opens, pushes take over. */
export const SOCKET_REDIAL_WHILE_POLLING_MS = 30_000;

/** Diagnostic switch for the stream bench (tests/bench/console-stream-bench.ts): with
 * `localStorage["iii-console-flush"] = "each"` every event renders on its own, the baseline the
 * per-frame batching is measured against. Not a setting anyone needs otherwise. */
const FLUSH_EACH = (() => {
  try {
    return typeof localStorage !== "undefined" && localStorage.getItem("iii-console-flush") === "each";
  } catch {
    return false;
  }
})();

export interface FollowHandlers {
  /** New events of the session, in id order, no duplicates (batched per animation frame). */
  events(items: EventItem[]): void;
  /** An event of a descendant (sub-agent), mirrored live into this session's group. */
  child?(event: SubAgentChildEvent): void;
  /** Whether pushes are live ("stream"), polled ("polling") or down ("reconnecting"). */
  mode?(mode: "joining" | "catching up" | "stream" | "polling" | "reconnecting"): void;
}

interface StreamPush {
  id?: string | null;
  event?: { type?: string; data?: unknown; event?: { type?: string; data?: unknown } };
}

/** Start following `sessionId` after the item `after` (null: from its first event); the returned
 * function stops. */
export function followSession(iii: BrowserClient, sessionId: string, on: FollowHandlers, after: string | null = null): () => void {
  let last: string | null = after;
  let stopped = false;
  let ws: WebSocket | undefined;
  let retry: ReturnType<typeof setTimeout> | undefined;
  let failures = 0;
  let polling = false;
  let redial: ReturnType<typeof setInterval> | undefined;
  let pending: EventItem[] = [];
  let frame: number | undefined;

  const flush = () => {
    frame = undefined;
    if (stopped || pending.length === 0) return;
    const batch = pending;
    pending = [];
    on.events(batch);
  };
  const schedule = () => {
    if (FLUSH_EACH) return flush();
    if (frame !== undefined) return;
    // A hidden tab gets no animation frames; a timer keeps its state current all the same.
    frame =
      typeof document !== "undefined" && document.visibilityState === "hidden"
        ? (setTimeout(flush, 100) as unknown as number)
        : requestAnimationFrame(flush);
  };
  const show = (item: EventItem) => {
    if (last !== null && item.item_id <= last) return;
    last = item.item_id;
    pending.push(item);
    schedule();
  };

  /** Everything after `last`, page by page; how many events were new. */
  const catchUp = async (): Promise<number> => {
    let n = 0;
    for (let pages = 0; !stopped; pages++) {
      const page = await iii.trigger<unknown, RunEventsResponse>({
        function_id: "run::events",
        payload: { session_id: sessionId, after: last, limit: EVENTS_PAGE },
        timeoutMs: CATCH_UP_TIMEOUT_MS,
      });
      for (const e of page.events) show(e);
      n += page.events.length;
      if (page.events.length < EVENTS_PAGE) return n;
      if (pages % CATCH_UP_PAGES_PER_BATCH === CATCH_UP_PAGES_PER_BATCH - 1) await new Promise((r) => setTimeout(r, 0));
    }
    return n;
  };

  const startPolling = () => {
    if (polling || stopped) return;
    polling = true;
    on.mode?.("polling");
    redial = setInterval(() => {
      if (!ws) void connect();
    }, SOCKET_REDIAL_WHILE_POLLING_MS);
    void poll();
  };
  const poll = async () => {
    while (!stopped && polling) {
      let fresh = 0;
      try {
        fresh = await catchUp();
      } catch {
        // the engine is away; the next round tries again
      }
      await new Promise((r) => (retry = setTimeout(r, fresh > 0 ? POLL_ACTIVE_MS : POLL_IDLE_MS)));
    }
  };

  const connect = async () => {
    if (stopped) return;
    if (!polling) on.mode?.("joining");
    const target = await streamTarget();
    if (stopped) return;
    let socket: WebSocket;
    try {
      socket = target.protocols.length > 0 ? new WebSocket(target.url, target.protocols) : new WebSocket(target.url);
    } catch {
      startPolling();
      return;
    }
    ws = socket;
    let buffered: StreamPush[] | null = null;
    let opened = false;
    const openTimer = setTimeout(() => {
      if (!opened) socket.close();
    }, SOCKET_OPEN_TIMEOUT_MS);
    socket.onopen = async () => {
      clearTimeout(openTimer);
      opened = true;
      failures = 0;
      if (polling) {
        // The socket works again: pushes take over from the poll loop.
        polling = false;
        clearInterval(redial);
      }
      buffered = [];
      socket.send(
        JSON.stringify({
          type: "join",
          data: { subscriptionId: `agent-console-${sessionId}`, streamName: "agent::events", groupId: sessionId },
        }),
      );
      on.mode?.("catching up");
      try {
        await catchUp();
      } catch {
        // run::events failed: what came before the pushes is unknown — dial again and catch up then
        socket.close();
        return;
      }
      const held = buffered ?? [];
      buffered = null;
      for (const p of held) handle(p);
      on.mode?.("stream");
    };
    socket.onmessage = (m) => {
      let p: StreamPush;
      try {
        p = JSON.parse(String(m.data)) as StreamPush;
      } catch {
        return;
      }
      if (buffered) buffered.push(p);
      else handle(p);
    };
    socket.onclose = () => {
      clearTimeout(openTimer);
      if (ws === socket) ws = undefined;
      if (stopped) return;
      if (polling) return; // a redial that did not open: the poll loop goes on
      if (!opened) failures++;
      if (failures >= SOCKET_FAILURES_BEFORE_POLLING) {
        startPolling();
        return;
      }
      on.mode?.("reconnecting");
      retry = setTimeout(() => void connect(), STREAM_RETRY_MS);
    };
  };

  const handle = (p: StreamPush) => {
    const ev = p.event;
    if (!ev) return;
    // The join's `sync` snapshot is what the catch-up read; `create` is a new event.
    if (ev.type === "create" && typeof p.id === "string" && ev.data && typeof ev.data === "object") {
      show({ item_id: p.id, data: ev.data as AgentEvent });
    } else if (ev.type === "event" && ev.event?.type === "child_event" && ev.event.data) {
      on.child?.(ev.event.data as SubAgentChildEvent);
    }
  };

  void connect();
  return () => {
    stopped = true;
    clearTimeout(retry);
    clearInterval(redial);
    if (frame !== undefined) {
      cancelAnimationFrame(frame);
      clearTimeout(frame);
    }
    ws?.close(1000, "done");
  };
}
