// Provider failover end to end (docs/harness.md, "Provider failover"): exactly `npm start` with the
// real OpenAI and Anthropic clients against the local replay. A run that names
// `options.fallback_models` keeps going on the next model when its own provider is rate-limited,
// down or cut before the first frame (its retries spent):
// - each way of failing, OpenAI → Anthropic and the reverse, the user seeing one answer;
// - every switch is an `agent::events` entry and a `provider_failover` span in the turn's trace;
// - the budget prices each round by the model that served it;
// - a provider that cannot be reached at all trips its circuit breaker: later steps go straight
//   to the fallback, and a run without one fails at once, saying so;
// - a malformed fallback entry is refused before anything starts.
import net from "node:net";
import type { ProviderFailoverEvent } from "@iii-edge/protocol/harness";
import type { AgentEvent, AssistantMessage, BudgetView } from "@iii-edge/protocol/harness";
import type { Span, TracesListOutput } from "@iii-edge/protocol/telemetry";
import { registerWorker, type IIIClient } from "iii-sdk";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import {
  callAgentTrigger,
  cutStream,
  permissionsFile,
  rateLimited,
  replayEnv,
  reply,
  replyWith,
  say,
  serverError,
  startProviderReplay,
  type ReplayServer,
} from "@iii-edge/test-support/provider-replay";
import { until } from "@iii-edge/test-support/wait";
import { agentSpan, textOf, turnClient, types, user, type EventItem } from "./turn-client.ts";

const PERMISSIONS = `version: 1
rules:
  - 'failover-app::*'
`;
/** How long after a turn its Worker spans may take to be stored (sent at the end of each invocation). */
const SPANS_SETTLE_MS = 15_000;
/** The breaker's threshold (workers/providers/src/breaker.ts BREAKER_FAILURE_THRESHOLD). */
const BREAKER_FAILURE_THRESHOLD = 3;

const CLAUDE = "anthropic:claude-sonnet-4-5";
const GPT = "openai:gpt-4o";

type Complete = Extract<AgentEvent, { type: "message_complete" }>;
const completes = (events: EventItem[]): AssistantMessage[] =>
  events.filter((e) => e.data.type === "message_complete").map((e) => (e.data as Complete).message);
const failovers = (events: EventItem[]): ProviderFailoverEvent[] =>
  events.map((e) => e.data as unknown as ProviderFailoverEvent).filter((e) => e.type === "provider_failover");

async function functionIds(iii: IIIClient): Promise<string[]> {
  const r = (await iii.trigger({ function_id: "engine::functions::list", payload: {} })) as { functions: { function_id: string }[] };
  return r.functions.map((f) => f.function_id);
}

async function harnessUp(engine: EngineServer, iii: IIIClient, ids: string[]): Promise<void> {
  await until(
    async () => {
      const have = await functionIds(iii);
      return ids.every((id) => have.includes(id)) && (await fetch(`${engine.url}/api/turns/none`)).status === 404;
    },
    "the harness",
    30_000,
    200,
  );
}

const sessionId = (name: string) => `fo-${name}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 6)}`;

/** A TCP pass-through to the replay at `port`, OpenAI's base URL for the suite, until `refuse()`: then
 * nothing listens there and every attempt is a refused connection, a provider nobody answers for. */
async function refusable(port: number): Promise<{ baseUrl: string; refuse(): Promise<void> }> {
  const open = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(port, "127.0.0.1");
    open.add(client).add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    client.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const own = (server.address() as net.AddressInfo).port;
  return {
    baseUrl: `http://127.0.0.1:${own}/v1`,
    async refuse() {
      const closed = new Promise((resolve) => server.close(resolve));
      // Kept-alive connections would still reach the replay: the next attempt must dial again.
      for (const socket of open) socket.destroy();
      await closed;
    },
  };
}

describe("provider failover with both providers on the replay", () => {
  let replay: ReplayServer;
  let engine: EngineServer;
  let iii: IIIClient;
  let ui: ReturnType<typeof turnClient>;
  let openai: Awaited<ReturnType<typeof refusable>>;
  const call = <T>(function_id: string, payload: unknown) => iii.trigger({ function_id, payload }) as Promise<T>;

  beforeAll(async () => {
    replay = await startProviderReplay();
    openai = await refusable(Number(new URL(replay.url).port));
    engine = await startEngine({
      env: {
        ...replayEnv(replay, { anthropic: true }),
        OPENAI_BASE_URL: openai.baseUrl,
        III_PERMISSIONS_PATH: permissionsFile(PERMISSIONS),
      },
    });
    iii = registerWorker(engine.wsUrl, { workerName: "failover-e2e-client", otel: { enabled: false } });
    iii.registerFunction("failover-app::echo", async (p: { text?: string }) => ({ echoed: p.text ?? "" }), { description: "Echo a text." });
    ui = turnClient(engine, () => iii);
    await harnessUp(engine, iii, ["run::start", "budget::record", "failover-app::echo"]);
  });

  afterAll(async () => {
    await iii?.shutdown();
    await engine?.stop();
    await openai?.refuse();
    await replay?.close();
  });

  beforeEach(() => replay.reset());

  // These cases share one engine, and so each provider's circuit breaker: their order keeps OpenAI
  // below BREAKER_FAILURE_THRESHOLD failed streams in a row (a served round clears the count) until
  // the last case, which trips it on purpose.
  it("OpenAI rate-limited on every attempt: Anthropic answers; the switch is an event and a span in the turn's trace", async () => {
    const sid = sessionId("429");
    replay.enqueue("openai", rateLimited({ ms: 10 }), rateLimited({ ms: 10 }), rateLimited({ ms: 10 }));
    replay.enqueue("anthropic", reply(say("Claude here.")));
    await ui.startTurn(sid, "hello", { options: { fallback_models: [CLAUDE] } });
    const { events } = await ui.finished(sid);

    expect(replay.requestsFor("openai")).toHaveLength(3);
    expect(replay.requestsFor("anthropic")).toHaveLength(1);
    // Anthropic was asked the user's question.
    expect(JSON.stringify(replay.requestsFor("anthropic")[0]!.body)).toContain("hello");
    const [m] = completes(events);
    expect(m).toMatchObject({ stop_reason: "end", provider: "anthropic", model: "claude-sonnet-4-5" });
    expect(textOf(m)).toBe("Claude here.");
    const [switched, ...more] = failovers(events);
    expect(more).toEqual([]);
    expect(switched).toMatchObject({
      from: { provider: "openai", model: "gpt-4o" },
      to: { provider: "anthropic", model: "claude-sonnet-4-5" },
      reason: "rate_limited",
    });
    expect(switched!.message).toContain("HTTP 429");
    // The switch comes before the answer, and the failed attempt showed the user nothing.
    const order = types(events);
    expect(order.indexOf("provider_failover" as AgentEvent["type"])).toBeLessThan(order.indexOf("message_complete"));
    expect(order.slice(0, order.indexOf("provider_failover" as AgentEvent["type"]))).not.toContain("message_update");

    // The turn's trace holds the switch, under the assistant_streaming step.
    const agent = await agentSpan(iii, sid, SPANS_SETTLE_MS);
    const [span] = (await until(
      async () => {
        const r = await call<TracesListOutput>("engine::traces::list", { trace_id: agent.trace_id, name: "provider_failover" });
        return r.spans.length > 0 ? r.spans : undefined;
      },
      "the provider_failover span",
      SPANS_SETTLE_MS,
    )) as Span[];
    expect(span!.attributes).toMatchObject({
      "iii.failover.from": GPT,
      "iii.failover.to": CLAUDE,
      "iii.failover.reason": "rate_limited",
    });
    expect(span!.events.map((e) => e.name)).toContain("provider_failover");
    const r = await call<TracesListOutput>("engine::traces::list", { trace_id: agent.trace_id, limit: 1000 });
    const parent = r.spans.find((s) => s.span_id === span!.parent_span_id);
    expect(parent?.name).toBe("step assistant_streaming");
  });

  it("Anthropic down (5xx on every attempt): OpenAI answers", async () => {
    const sid = sessionId("reverse");
    replay.enqueue("anthropic", serverError(), serverError(502), serverError(503));
    replay.enqueue("openai", reply(say("GPT here.")));
    await ui.startTurn(sid, "hello", { provider: "anthropic", model: "claude-sonnet-4-5", options: { fallback_models: [GPT] } });
    const { events } = await ui.finished(sid);

    expect(replay.requestsFor("anthropic")).toHaveLength(3);
    expect(replay.requestsFor("openai")).toHaveLength(1);
    const [m] = completes(events);
    expect(m).toMatchObject({ stop_reason: "end", provider: "openai", model: "gpt-4o" });
    expect(textOf(m)).toBe("GPT here.");
    expect(failovers(events)).toEqual([
      expect.objectContaining({
        from: { provider: "anthropic", model: "claude-sonnet-4-5" },
        to: { provider: "openai", model: "gpt-4o" },
        reason: "transient",
      }),
    ]);
  });

  it("OpenAI cut before its first frame: Anthropic answers", async () => {
    const sid = sessionId("cut");
    // Cut before any event: depending on whether the 200's headers got out first, the provider sees
    // a refused response (retried) or an empty stream; either way every attempt is cut.
    const cut = cutStream(0, say("never seen"));
    replay.enqueue("openai", cut, cut, cut);
    replay.enqueue("anthropic", reply(say("Claude after the cut.")));
    await ui.startTurn(sid, "hello", { options: { fallback_models: [CLAUDE] } });
    const { events } = await ui.finished(sid);

    expect(replay.requestsFor("anthropic")).toHaveLength(1);
    const [m] = completes(events);
    expect(m).toMatchObject({ provider: "anthropic" });
    expect(textOf(m)).toBe("Claude after the cut.");
    expect(failovers(events)).toEqual([expect.objectContaining({ from: { provider: "openai", model: "gpt-4o" }, reason: "transient" })]);
    expect(JSON.stringify(completes(events))).not.toContain("never seen");

    // A resumed run on the same model keeps the session's fallbacks.
    replay.enqueue("openai", rateLimited({ ms: 10 }), rateLimited({ ms: 10 }), rateLimited({ ms: 10 }));
    replay.enqueue("anthropic", reply(say("Claude again.")));
    const res = await ui.post(`api/turns/${sid}/resume`, { message: "and again" });
    expect(res.status, await res.clone().text()).toBe(200);
    const before = events.length;
    const { events: all } = await until(
      async () => {
        const done = await ui.finished(sid);
        return done.events.length > before && done.events.at(-1)?.data.type === "agent_end" ? done : undefined;
      },
      "the resumed run's end",
      30_000,
    );
    const later = all.slice(before);
    expect(failovers(later)).toEqual([expect.objectContaining({ reason: "rate_limited" })]);
    expect(textOf(completes(later)[0])).toBe("Claude again.");
  });

  it("the budget prices each round by the model that served it", async () => {
    const { budget_id } = await call<{ budget_id: string }>("budget::create", { ceiling_usd: 5, period: "day" });
    const sid = sessionId("usage");
    replay.enqueue(
      "openai",
      replyWith({ usage: { input: 1_000, output: 100 } }, callAgentTrigger("failover-app::echo", { text: "ping" }, "e-1")),
      serverError(),
      serverError(),
      serverError(),
    );
    replay.enqueue("anthropic", replyWith({ usage: { input: 1_000, output: 100 } }, say("pong")));
    await ui.startTurn(sid, "echo ping", { budget_id, options: { fallback_models: [CLAUDE] } });
    const { view, events } = await ui.finished(sid);
    expect(view.turn_count).toBe(2);
    expect(completes(events).map((m) => m.provider)).toEqual(["openai", "anthropic"]);
    // gpt-4o (2.5 / 10 USD per 1M in / out): 1000 × 2.5 + 100 × 10 = 3500 µUSD;
    // claude-sonnet-4-5 (3 / 15): 1000 × 3 + 100 × 15 = 4500 µUSD — not 3500 again at gpt-4o's price.
    expect(await call<BudgetView>("budget::get", { budget_id })).toMatchObject({ spent_micros: 3_500 + 4_500, records_count: 2 });
  });

  it("a failure after the answer began streaming is not handed over: the run fails as before", async () => {
    const sid = sessionId("mid");
    replay.enqueue("openai", cutStream(3, say("a long answer that will be cut somewhere in the middle")));
    replay.enqueue("anthropic", reply(say("must not be asked")));
    await ui.startTurn(sid, "hello", { options: { fallback_models: [CLAUDE] } });
    const { view, events } = await ui.finished(sid, "failed");
    expect(view.error?.kind).toBe("transient");
    expect(failovers(events)).toEqual([]);
    expect(replay.requestsFor("anthropic")).toHaveLength(0);
  });

  it("a malformed fallback entry is refused before anything starts, over HTTP and on run::start", async () => {
    const sid = sessionId("bad");
    for (const bad of [["anthropic"], [":claude"], ["Anthropic:claude"], ["anthropic:"], [CLAUDE, CLAUDE, CLAUDE, CLAUDE, CLAUDE], "x"]) {
      const res = await ui.post("api/turns", {
        session_id: sid,
        payload: { session_id: sid, model: "gpt-4o", messages: [user("hi")], options: { fallback_models: bad } },
      });
      expect(res.status, JSON.stringify(bad)).toBe(400);
      expect(await res.json()).toMatchObject({ error: { code: "invalid_payload" } });
    }
    const direct = await call("run::start", {
      session_id: sid,
      model: "gpt-4o",
      messages: [user("hi")],
      options: { fallback_models: ["nocolon"] },
    }).then(
      () => undefined,
      (e: unknown) => e as { code?: string; message?: string },
    );
    expect(direct?.code).toBe("invalid_input");
    expect(direct?.message).toContain("fallback_models");
    expect(await ui.turnState(sid)).toBeNull();
    expect(replay.requests).toHaveLength(0);
  });

  // Last: it leaves OpenAI unreachable and its breaker open.
  it("a provider nobody answers for trips its circuit breaker: refused connections go to the fallback; once the breaker opens OpenAI is skipped, and a run without a fallback fails at once", async () => {
    // The cases before left OpenAI with failed streams on its count: one served round clears it, so
    // the breaker starts closed with no failures, as on a fresh engine.
    const served = sessionId("served");
    replay.enqueue("openai", reply(say("OpenAI served.")));
    await ui.startTurn(served, "hello");
    expect(textOf(completes((await ui.finished(served)).events)[0])).toBe("OpenAI served.");
    replay.reset();
    await openai.refuse();
    replay.setDefault("anthropic", reply(say("Claude stands in.")));
    for (let i = 1; i <= BREAKER_FAILURE_THRESHOLD + 1; i++) {
      const sid = sessionId(`refused-${i}`);
      await ui.startTurn(sid, "hello", { options: { fallback_models: [CLAUDE] } });
      const { events } = await ui.finished(sid);
      expect(textOf(completes(events)[0])).toBe("Claude stands in.");
      const [switched] = failovers(events);
      // Until the threshold each step spent OpenAI's retries on a refused connection; after it the
      // breaker answers for OpenAI without a request.
      if (i <= BREAKER_FAILURE_THRESHOLD) {
        expect(switched).toMatchObject({ reason: "transient" });
        expect(switched!.message).toMatch(/cannot reach 127\.0\.0\.1:\d+/);
      } else {
        expect(switched).toMatchObject({ reason: "circuit_open" });
        expect(switched!.message).toMatch(/^provider_circuit_open: openai failed 3 streams in a row/);
      }
    }
    expect(replay.requestsFor("anthropic")).toHaveLength(BREAKER_FAILURE_THRESHOLD + 1);

    const sid = sessionId("no-fallback");
    await ui.startTurn(sid, "hello");
    const { view } = await ui.finished(sid, "failed");
    expect(view.error).toMatchObject({ kind: "transient" });
    expect(view.error!.message).toMatch(/^provider_circuit_open: /);
  });
});
