// What a UI does with a turn, over the harness's HTTP API (workers/harness): start it, read its
// state, page its `agent::events` with the resume cursor, wait for its end, read its transcript.
// Shared by the harness suites so each scenario reads as what a user would see.
import type { AgentEvent, AgentMessage, TurnStateView } from "@iii-edge/protocol/harness";
import type { Span, TracesListOutput } from "@iii-edge/protocol/telemetry";
import { expect } from "vitest";
import type { EngineServer } from "@iii-edge/test-support/engine-server";
import type { RecordedRequest, ReplayServer } from "@iii-edge/test-support/provider-replay";
import { until } from "@iii-edge/test-support/wait";

/** How long one turn may take end to end on the shared 2-core box (several durable queue hops). */
export const TURN_DEADLINE_MS = 30_000;
/** How much of the engine's log a stuck turn's failure shows. */
const ENGINE_LOG_TAIL_CHARS = 4_000;

export type EventItem = { item_id: string; data: AgentEvent };

/** Anything that can call a function (the unmodified iii-sdk client does). */
export interface Caller {
  trigger(request: { function_id: string; payload?: unknown }): Promise<unknown>;
}

/** A function as `engine::functions::list` lists it. */
export type ListedFunction = { function_id: string; worker_name?: string | null };
/** A suite's workers register within this on the shared 2-core box. */
const REGISTER_DEADLINE_MS = 30_000;

/** The catalog as `caller` sees it (`payload`: the listing's filters, e.g. `include_internal`). */
export async function listedFunctions(caller: Caller, payload: Record<string, unknown> = {}): Promise<ListedFunction[]> {
  return ((await caller.trigger({ function_id: "engine::functions::list", payload })) as { functions: ListedFunction[] }).functions;
}

/** Wait until `ready` holds of the listed catalog (a replacement registered, a built-in present or gone). */
export async function untilListed(
  caller: Caller,
  what: string,
  ready: (fns: ListedFunction[]) => boolean,
  payload: Record<string, unknown> = {},
): Promise<void> {
  await until(async () => ready(await listedFunctions(caller, payload)), what, REGISTER_DEADLINE_MS);
}

/** A suite's teardown: its clients first, then the engine they were connected to, then the replay. */
export async function stopAll(
  engine: EngineServer | undefined,
  replay: ReplayServer | undefined,
  ...clients: ({ shutdown(): Promise<unknown> } | undefined)[]
): Promise<void> {
  await Promise.allSettled(clients.map((c) => c?.shutdown()));
  await engine?.stop();
  await replay?.close();
}

/** The `invoke_agent` root span of `sid`'s turn, once the engine has stored it (waits up to `ms`). */
export async function agentSpan(caller: Caller, sid: string, ms: number): Promise<Span> {
  const spans = await until(
    async () => {
      const r = (await caller.trigger({
        function_id: "engine::traces::list",
        payload: { session_id: sid, name: "invoke_agent" },
      })) as TracesListOutput;
      return r.spans.length > 0 ? r.spans : undefined;
    },
    `the invoke_agent span of ${sid}`,
    ms,
  );
  return spans[0]!;
}

/** Every span of a trace, all pages. */
export async function spansOfTrace(caller: Caller, trace_id: string): Promise<Span[]> {
  const out: Span[] = [];
  for (let offset = 0; ; ) {
    const page = (await caller.trigger({
      function_id: "engine::traces::list",
      payload: { trace_id, offset, limit: 1000 },
    })) as TracesListOutput;
    out.push(...page.spans);
    offset += page.spans.length;
    if (page.spans.length === 0 || offset >= page.total) return out;
  }
}

/** A function's invocation metadata as a record: for a call a model made, who called
 * (`session_id`, `function_call_id`, `function_id`); `{}` for a call without any. */
export const metaOf = (metadata: unknown): Record<string, unknown> =>
  metadata && typeof metadata === "object" && !Array.isArray(metadata) ? (metadata as Record<string, unknown>) : {};

export const user = (text: string): AgentMessage => ({ role: "user", content: [{ type: "text", text }], timestamp: Date.now() });

export const types = (evs: { data: AgentEvent }[]) => evs.map((e) => e.data.type);

export const textOf = (m: AgentMessage | undefined): string =>
  m && Array.isArray(m.content)
    ? (m.content as { type: string; text?: string }[])
        .filter((b) => b.type === "text")
        .map((b) => b.text ?? "")
        .join("")
    : "";

/** OpenAI request messages. */
export const openaiMessages = (r: RecordedRequest | undefined) =>
  (r?.body?.messages ?? []) as { role: string; content?: unknown; tool_call_id?: string; tool_calls?: unknown[] }[];

export const asText = (content: unknown): string => (typeof content === "string" ? content : JSON.stringify(content));

export function turnClient(engine: EngineServer, caller: () => Caller) {
  const post = (p: string, body: unknown) =>
    fetch(`${engine.url}/${p}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

  async function startTurn(sid: string, text: string, extra: Record<string, unknown> = {}): Promise<void> {
    const res = await post("api/turns", {
      session_id: sid,
      message_id: `${sid}-m1`,
      payload: { session_id: sid, message_id: `${sid}-m1`, model: "gpt-4o", provider: "openai", messages: [user(text)], ...extra },
    });
    expect(res.status, await res.clone().text()).toBe(200);
    expect(await res.json()).toEqual({ session_id: sid, started: true });
  }

  async function turnState(sid: string): Promise<TurnStateView | null> {
    const res = await fetch(`${engine.url}/api/turns/${sid}`);
    if (res.status === 404) return null;
    return (await res.json()) as TurnStateView;
  }

  /** Every `agent::events` item of a session, paged with the resume cursor as a UI would. */
  async function allEvents(sid: string, after?: string): Promise<EventItem[]> {
    const out: EventItem[] = [];
    let cursor = after;
    for (;;) {
      const q = cursor ? `?after=${encodeURIComponent(cursor)}&limit=100` : "?limit=100";
      const res = await fetch(`${engine.url}/api/turns/${sid}/events${q}`);
      expect(res.status).toBe(200);
      const page = (await res.json()) as { events: EventItem[]; next: string | null };
      out.push(...page.events);
      if (page.events.length === 0) return out;
      cursor = page.next ?? undefined;
    }
  }

  /** Wait until the turn is in `state` (e.g. parked for approval). */
  const reached = (sid: string, state: TurnStateView["state"]) =>
    until(
      async () => {
        const v = await turnState(sid);
        return v?.state === state ? v : undefined;
      },
      `session ${sid} in ${state}`,
      TURN_DEADLINE_MS,
    );

  /** The run ended (`stopped`/`failed`) and its last event, `agent_end`, is out. */
  async function finished(
    sid: string,
    state: "stopped" | "failed" = "stopped",
    deadlineMs = TURN_DEADLINE_MS,
  ): Promise<{ view: TurnStateView; events: EventItem[] }> {
    try {
      return await until(
        async () => {
          const view = await turnState(sid);
          if (view?.state !== state) return undefined;
          const events = await allEvents(sid);
          return events.at(-1)?.data.type === "agent_end" ? { view, events } : undefined;
        },
        `session ${sid} ${state} with agent_end`,
        deadlineMs,
        100,
      );
    } catch (e) {
      // Say where the turn got stuck: its state, its events, and what the engine logged.
      const view = await turnState(sid).catch(() => undefined);
      const evs = await allEvents(sid).catch(() => []);
      throw new Error(
        `${(e as Error).message}\nstate: ${JSON.stringify(view)}\nevents: ${types(evs).join(" ")}\nengine output (tail):\n${engine.output().slice(-ENGINE_LOG_TAIL_CHARS)}`,
      );
    }
  }

  async function transcript(sid: string): Promise<AgentMessage[]> {
    const r = (await caller().trigger({ function_id: "session-tree::messages", payload: { session_id: sid } })) as {
      messages: { message: AgentMessage }[];
    };
    return r.messages.map((m) => m.message);
  }

  return { post, startTurn, turnState, allEvents, reached, finished, transcript };
}
