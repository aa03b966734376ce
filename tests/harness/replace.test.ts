// Replacing a harness worker is configuration, not a race (workers/README.md):
// - `npm start` with HARNESS_DISABLE=policy leaves the built-in policy out of the deployed Worker;
//   a separate Node process with the unmodified iii-sdk registers `policy::check_permissions`, and
//   the next turn asks it — no harness change, no registration step;
// - a built-in worker that is running keeps its ids: another process registering one of them is
//   refused, and the built-in still answers (no silent takeover);
// - the turn orchestrator replaced by a process serving only its public contract (run::status,
//   run::request, turn::get_state, turn::subscribe): a sub-agent spawn, its join and the console's
//   agent screen reads work against it, since nothing else reads the orchestrator's own state;
// - every built-in worker also runs alone as a Node process (`npm run worker -- <name>`): with the
//   whole stack left out of the Worker, one process each (HARNESS_WORKERS) makes the same turn work.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { harness } from "@iii-edge/demo-app/agent-calls";
import { POLICY_TIMEOUT_MS, type FunctionResultMessage, type RunRequestView, type RunStartRequest } from "@iii-edge/protocol/harness";
import type { BrowserClient } from "@iii-edge/sdk-browser";
import { registerWorker, type IIIClient } from "iii-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoRoot, startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { callAgentTrigger, reply, say, startProviderReplay, type ReplayServer } from "@iii-edge/test-support/provider-replay";
import { serveRunContract, type RunContract } from "@iii-edge/test-support/run-contract";
import { until } from "@iii-edge/test-support/wait";
import { HARNESS_WORKERS } from "@iii-edge/test-support/harness-workers";
import { listedFunctions, metaOf, stopAll, textOf, turnClient, untilListed } from "./turn-client.ts";

/** A Node worker process starts (npm, Node, type stripping of its sources) within this. */
const WORKER_START_MS = 60_000;

const PERMISSIONS = `version: 1
rules:
  - 'weather::*'
`;

/** The application: a forecast function, registered with the unmodified iii-sdk. */
function weatherApp(engine: EngineServer, ran: string[]): IIIClient {
  const app = registerWorker(engine.wsUrl, { workerName: "weather-app", otel: { enabled: false } });
  app.registerFunction(
    "weather::forecast",
    async (a: { city: string }, metadata?: unknown) => {
      ran.push(String(metaOf(metadata).session_id));
      return { city: a.city, sky: "clear" };
    },
    { description: "The weather forecast for a city." },
  );
  return app;
}

const TINY_WINDOW_MODEL = "gpt-4o-tiny-window";

// The policy and context-compaction replacements share one engine: HARNESS_DISABLE leaves both out,
// and neither describe's turns reach the other's worker (the policy cases' turns stay far from a
// window's end, where the orchestrator would ask compact_now; the compaction case's turns call no
// function, so no policy is asked).
describe("policy and context-compaction left out (HARNESS_DISABLE=policy,context-compaction)", () => {
  let replay: ReplayServer;
  let engine: EngineServer;

  beforeAll(async () => {
    replay = await startProviderReplay();
    engine = await startEngine({
      env: {
        OPENAI_BASE_URL: replay.openaiBaseUrl,
        OPENAI_API_KEY: "sk-test",
        HARNESS_DISABLE: "policy,context-compaction",
        MODELS_OVERRIDES: JSON.stringify([{ provider: "openai", id: TINY_WINDOW_MODEL, context_window: 20_000, max_output_tokens: 1_000 }]),
      },
    });
  });

  afterAll(() => stopAll(engine, replay));

  describe("a built-in worker left out by configuration, its ids registered by another process", () => {
    let iii: IIIClient;
    let policy: IIIClient;
    let app: IIIClient;
    const asked: { function_id: string; args: unknown }[] = [];
    const ran: string[] = [];

    beforeAll(async () => {
      iii = registerWorker(engine.wsUrl, { workerName: "replace-client", otel: { enabled: false } });
      app = weatherApp(engine, ran);
      // The replacement policy: its own rules (anything about the weather, nothing else).
      policy = registerWorker(engine.wsUrl, { workerName: "my-policy", otel: { enabled: false } });
      policy.registerFunction("policy::check_permissions", async (req: { function_id: string; args: unknown }) => {
        asked.push({ function_id: req.function_id, args: req.args });
        if (req.function_id.startsWith("hang::")) return new Promise(() => undefined); // a policy that never answers
        return req.function_id.startsWith("weather::")
          ? { decision: "allow", rule_id: "my-weather" }
          : { decision: "deny", rule_id: "my-default", rule_action: "deny" };
      });
      await untilListed(
        iii,
        "the replacement policy, the built-in orchestrator and the app",
        (fns) =>
          fns.some((f) => f.function_id === "policy::check_permissions") &&
          fns.some((f) => f.function_id === "run::start") &&
          fns.some((f) => f.function_id === "weather::forecast"),
      );
    });

    afterAll(() => Promise.allSettled([iii?.shutdown(), policy?.shutdown(), app?.shutdown()]));

    it("the deployed Worker registers no policy; the next turn asks the iii-sdk process's, and its decisions hold", async () => {
      const fns = await listedFunctions(iii);
      expect(fns.filter((f) => f.function_id === "policy::check_permissions")).toHaveLength(1);
      expect(fns.find((f) => f.function_id === "policy::check_permissions")!.worker_name).toBe("my-policy");

      const ui = turnClient(engine, () => iii);
      replay.enqueue(
        "openai",
        reply(callAgentTrigger("weather::forecast", { city: "Turin" }, "r-1"), callAgentTrigger("files::delete", { path: "/" }, "r-2")),
        reply(say("Turin is clear; I may not delete files.")),
      );
      await ui.startTurn("replaced", "weather in Turin, and delete /");
      await ui.finished("replaced");
      expect(asked.map((a) => a.function_id)).toEqual(["weather::forecast", "files::delete"]);
      expect(ran).toEqual(["replaced"]);
      const results = (await ui.transcript("replaced")).filter((m): m is FunctionResultMessage => m.role === "function_result");
      expect(results.map((r) => [r.function_call_id, r.is_error])).toEqual([
        ["r-1", false],
        ["r-2", true],
      ]);
      expect(results[1]!.details).toMatchObject({ status: "denied", denied_by: "permissions", rule_id: "my-default" });
    });

    it("a policy that does not answer within 5 s denies (gate_unavailable); so does a policy that is gone", async () => {
      const ui = turnClient(engine, () => iii);
      replay.enqueue("openai", reply(callAgentTrigger("hang::forever", {}, "g-1")), reply(say("The gate did not answer.")));
      const t0 = Date.now();
      await ui.startTurn("policy-slow", "try the hanging one");
      const { events } = await ui.finished("policy-slow");
      const end = events.find((e) => e.data.type === "function_execution_end")!.data as {
        function_call_id: string;
        is_error: boolean;
        result: { details: unknown };
      };
      expect(end).toMatchObject({
        function_call_id: "g-1",
        is_error: true,
        result: { details: { status: "denied", denied_by: "gate_unavailable" } },
      });
      // Denied at the 5 s bound (POLICY_TIMEOUT_MS), not after a call's 30 s default: the model's
      // second request comes 5 s after its first, plus the turn's own hops.
      const [first, second] = replay.requestsFor("openai").slice(-2);
      const gap = second!.received_at - first!.received_at;
      expect(gap).toBeGreaterThanOrEqual(POLICY_TIMEOUT_MS);
      expect(gap).toBeLessThan(POLICY_TIMEOUT_MS + 5_000);
      expect(Date.now() - t0).toBeLessThan(30_000);

      await policy.shutdown();
      await untilListed(iii, "the policy process gone", (fns) => !fns.some((f) => f.function_id === "policy::check_permissions"));
      replay.enqueue("openai", reply(callAgentTrigger("weather::forecast", { city: "Bari" }, "g-2")), reply(say("No gate, no call.")));
      await ui.startTurn("policy-down", "weather in Bari");
      const down = await ui.finished("policy-down");
      expect(down.events.find((e) => e.data.type === "function_execution_end")!.data).toMatchObject({
        function_call_id: "g-2",
        is_error: true,
        result: { details: { denied_by: "gate_unavailable" } },
      });
      expect(ran).not.toContain("policy-down");
    });

    it("a built-in that is running keeps its ids: another process's registration is refused and the built-in still answers", async () => {
      const intruder = registerWorker(engine.wsUrl, { workerName: "intruder", otel: { enabled: false } });
      try {
        let intruderCalled = false;
        intruder.registerFunction("approval::resolve", async () => {
          intruderCalled = true;
          return { ok: true };
        });
        intruder.registerFunction("intruder::ready", async () => ({ ok: true }));
        // Once its next registration is in, the earlier one has been dealt with (frames are in order).
        await untilListed(iii, "the intruder's registrations", (fns) => fns.some((f) => f.function_id === "intruder::ready"));
        const holder = (await listedFunctions(iii)).filter((f) => f.function_id === "approval::resolve");
        expect(holder).toHaveLength(1);
        expect(holder[0]!.worker_name).toBe("HARNESS");
        // The built-in answers, and validates as the built-in does.
        expect(
          await iii.trigger({ function_id: "approval::resolve", payload: { session_id: "a/b", function_call_id: "c", decision: "allow" } }),
        ).toEqual({ ok: false, error: "invalid_payload" });
        expect(intruderCalled).toBe(false);
      } finally {
        await intruder.shutdown();
      }
    });
  });

  describe("context-compaction replaced by an iii-sdk process", () => {
    const MODEL = TINY_WINDOW_MODEL;
    let iii: IIIClient;
    let compactor: IIIClient;
    const asked: { session_id: string; projected_tokens: number }[] = [];

    beforeAll(async () => {
      // The requests counted below are this describe's alone, as with a replay of its own.
      replay.reset();
      iii = registerWorker(engine.wsUrl, { workerName: "compaction-replace-client", otel: { enabled: false } });
      // The replacement: summarises everything before the newest message as one line, through the
      // same session-storage functions the built-in uses.
      compactor = registerWorker(engine.wsUrl, { workerName: "my-compactor", otel: { enabled: false } });
      compactor.registerFunction("context-compaction::compact_now", async (req: { session_id: string; projected_tokens: number }) => {
        asked.push({ session_id: req.session_id, projected_tokens: req.projected_tokens });
        const { messages } = (await compactor.trigger({
          function_id: "session-tree::messages",
          payload: { session_id: req.session_id },
        })) as { messages: { entry_id: string }[] };
        const tail = messages.at(-1)!.entry_id;
        const summary = "SUMMARY-BY-MY-COMPACTOR";
        const { entry_id } = (await compactor.trigger({
          function_id: "session-tree::compact",
          payload: {
            session_id: req.session_id,
            summary,
            tokens_before: req.projected_tokens,
            details: { read_files: [], modified_files: [] },
            tail_start_id: tail,
          },
        })) as { entry_id: string };
        return {
          status: "ok",
          summary_text: summary,
          tokens_before: req.projected_tokens,
          tokens_after: 0,
          compaction_entry_id: entry_id,
          tail_start_id: tail,
          auto_continued: false,
        };
      });
      await untilListed(
        iii,
        "the replacement compactor and the orchestrator",
        (fns) =>
          fns.find((f) => f.function_id === "context-compaction::compact_now")?.worker_name === "my-compactor" &&
          fns.some((f) => f.function_id === "run::start"),
      );
    });

    afterAll(() => Promise.allSettled([iii?.shutdown(), compactor?.shutdown()]));

    it("a session past its model's window: the orchestrator asks the replacement, and the model's next request carries its summary instead of the head", async () => {
      const ui = turnClient(engine, () => iii);
      const sid = "compaction-replaced";
      // Runs of a large message each, until the window is full enough for the pre-flight to ask.
      for (let k = 1; k <= 6 && asked.length === 0; k++) {
        replay.enqueue("openai", reply(say(`reply ${k}`)));
        const res = await ui.post("api/turns", {
          payload: {
            session_id: sid,
            message_id: `${sid}-m${k}`,
            model: MODEL,
            provider: "openai",
            messages: [{ role: "user", content: `MARK-${k} ${"alpha ".repeat(3_000)}`, timestamp: Date.now() }],
          },
        });
        expect(res.status, await res.clone().text()).toBe(200);
        await ui.finished(sid);
      }
      expect(asked.length).toBeGreaterThan(0);
      expect(asked[0]!.session_id).toBe(sid);
      // It took more than one run to fill the window, so there was a head to summarise.
      expect(replay.requestsFor("openai").length).toBeGreaterThan(1);
      const last = replay.requestsFor("openai").at(-1)!;
      const sent = JSON.stringify(last.body!.messages);
      expect(sent).toContain("SUMMARY-BY-MY-COMPACTOR");
      expect(sent).not.toContain("MARK-1 ");
    });
  });
});

describe("session-storage replaced by an iii-sdk process", () => {
  let replay: ReplayServer;
  let engine: EngineServer;
  let iii: IIIClient;
  let store: IIIClient;
  const calls: string[] = [];

  beforeAll(async () => {
    replay = await startProviderReplay();
    engine = await startEngine({
      env: { OPENAI_BASE_URL: replay.openaiBaseUrl, OPENAI_API_KEY: "sk-test", HARNESS_DISABLE: "session-storage" },
    });
    iii = registerWorker(engine.wsUrl, { workerName: "storage-replace-client", otel: { enabled: false } });
    // The replacement: a linear transcript per session in this process's memory — the contract the
    // orchestrator needs (ensure, append by entry id, messages in order, inboxes), nothing more.
    type Entry = { entry_id: string; message: unknown };
    const sessions = new Map<string, Entry[]>();
    const inboxes = new Map<string, unknown[]>();
    store = registerWorker(engine.wsUrl, { workerName: "my-session-store", otel: { enabled: false } });
    const fn = (id: string, handler: (req: Record<string, unknown>) => unknown) =>
      store.registerFunction(id, async (req: Record<string, unknown>) => {
        calls.push(id);
        return handler(req);
      });
    const append = (sid: string, e: { entry_id?: string; message: unknown }) => {
      const list = sessions.get(sid)!;
      const entry_id = e.entry_id ?? `e${list.length + 1}`;
      if (list.some((x) => x.entry_id === entry_id)) return { entry_id, appended: false };
      list.push({ entry_id, message: e.message });
      return { entry_id, appended: true };
    };
    fn("session-tree::ensure", (r) => {
      const sid = String(r.session_id);
      const created = !sessions.has(sid);
      if (created) sessions.set(sid, []);
      return { session_id: sid, created };
    });
    fn("session-tree::get", (r) =>
      sessions.has(String(r.session_id)) ? { session_id: r.session_id, entry_count: sessions.get(String(r.session_id))!.length } : null,
    );
    fn("session-tree::append", (r) => append(String(r.session_id), r as { entry_id?: string; message: unknown }));
    fn("session-tree::append_many", (r) => {
      const out = (r.entries as { entry_id?: string; message: unknown }[]).map((e) => append(String(r.session_id), e));
      return { entry_ids: out.map((o) => o.entry_id), appended: out.filter((o) => o.appended).length };
    });
    fn("session-tree::update_message", (r) => {
      const e = sessions.get(String(r.session_id))!.find((x) => x.entry_id === r.entry_id)!;
      e.message = r.message;
      return { ok: true };
    });
    fn("session-tree::messages", (r) => ({ messages: sessions.get(String(r.session_id)) ?? [], next_cursor: null }));
    const box = (r: Record<string, unknown>) => `${String(r.session_id)}/${String(r.name)}`;
    fn("session-inbox::push", (r) => {
      const items = inboxes.get(box(r)) ?? [];
      items.push(r.item);
      inboxes.set(box(r), items);
      return { ok: true, size: items.length };
    });
    fn("session-inbox::peek", (r) => ({ items: inboxes.get(box(r)) ?? [] }));
    fn("session-inbox::drain", (r) => {
      const items = inboxes.get(box(r)) ?? [];
      inboxes.delete(box(r));
      return { items };
    });
    await untilListed(
      iii,
      "the replacement store and the orchestrator",
      (fns) =>
        fns.find((f) => f.function_id === "session-tree::messages")?.worker_name === "my-session-store" &&
        fns.some((f) => f.function_id === "run::start"),
    );
  });

  afterAll(() => stopAll(engine, replay, iii, store));

  it("a turn stores its transcript in the replacement, and the model's second request is built from it", async () => {
    const ui = turnClient(engine, () => iii);
    replay.enqueue("openai", reply(say("first answer")));
    await ui.startTurn("stored-elsewhere", "remember the word TANGERINE");
    await ui.finished("stored-elsewhere");
    replay.enqueue("openai", reply(say("second answer")));
    const res = await ui.post("api/turns", {
      payload: {
        session_id: "stored-elsewhere",
        message_id: "stored-elsewhere-m2",
        model: "gpt-4o",
        provider: "openai",
        messages: [{ role: "user", content: "which word?", timestamp: Date.now() }],
      },
    });
    expect(res.status).toBe(200);
    await ui.finished("stored-elsewhere");
    const msgs = await ui.transcript("stored-elsewhere");
    expect(msgs.map((m) => m.role)).toEqual(["user", "assistant", "user", "assistant"]);
    expect(calls).toEqual(
      expect.arrayContaining(["session-tree::ensure", "session-tree::append_many", "session-tree::messages", "session-tree::append"]),
    );
    const second = JSON.stringify(replay.requestsFor("openai").at(-1)!.body!.messages);
    expect(second).toContain("TANGERINE");
    expect(second).toContain("first answer");
  });
});

describe("the turn orchestrator replaced by an iii-sdk process that serves only its public contract", () => {
  let engine: EngineServer;
  let iii: IIIClient;
  let orch: IIIClient;
  let runs: RunContract;
  const started: { session_id: string; parent?: { session_id: string } }[] = [];

  beforeAll(async () => {
    engine = await startEngine({ env: { HARNESS_DISABLE: "turn-orchestrator" } });
    iii = registerWorker(engine.wsUrl, { workerName: "orchestrator-replace-client", otel: { enabled: false } });
    // The replacement: runs kept in scopes of its own naming, served through the contract
    // (run::status, run::request, turn::get_state, turn::subscribe) — no model, no steps: a run
    // stays where this test puts it.
    orch = registerWorker(engine.wsUrl, { workerName: "my-orchestrator", otel: { enabled: false } });
    runs = serveRunContract(orch, "my_orchestrator");
    orch.registerFunction("run::start", async (req: RunStartRequest & { parent?: { session_id: string } }) => {
      started.push({ session_id: req.session_id, ...(req.parent ? { parent: req.parent } : {}) });
      const run_id = req.message_id ?? `run-${started.length}`;
      const request: RunRequestView = { provider: req.provider ?? "openai", model: req.model, mode: req.mode ?? null };
      if (req.max_turns !== undefined) request.max_turns = req.max_turns;
      if (req.parent) request.parent = req.parent as RunRequestView["parent"];
      await runs.setRequest(req.session_id, request);
      await runs.setStatus({
        session_id: req.session_id,
        run_id,
        state: "assistant_streaming",
        turn_count: 0,
        stop_requested: false,
        final_text: null,
      });
      return { session_id: req.session_id, started: true };
    });
    orch.registerFunction("turn::stop", async (req: { session_id: string }) => {
      const cur = await runs.status(req.session_id);
      if (!cur || cur.state === "stopped" || cur.state === "failed")
        return { session_id: req.session_id, stopping: false, state: cur?.state ?? null };
      await runs.setStatus({ ...cur, state: "stopped" });
      return { session_id: req.session_id, stopping: true, state: cur.state };
    });
    await until(
      async () => {
        const fns = await listedFunctions(iii);
        const owner = (id: string) => fns.find((f) => f.function_id === id)?.worker_name;
        return (
          owner("run::status") === "my-orchestrator" &&
          owner("turn::subscribe") === "my-orchestrator" &&
          fns.some((f) => f.function_id === "harness::spawn")
        );
      },
      "the replacement orchestrator and the built-in sub-agents",
      30_000,
    );
  });

  afterAll(async () => {
    await Promise.allSettled([iii?.shutdown(), orch?.shutdown()]);
    await engine?.stop();
  });

  it("a sub-agent spawn, its join and the console's agent screen run on the replacement", async () => {
    const parent = "rp-parent";
    await iii.trigger({
      function_id: "run::start",
      payload: { session_id: parent, message_id: "rp-run", provider: "openai", model: "gpt-4o", messages: [] },
    });
    // The built-in sub-agents worker spawns through the replacement: it reads the parent's run
    // (run::status, run::request), starts the child (run::start) and follows it (turn::subscribe).
    const spawned = (await iii.trigger({
      function_id: "harness::spawn",
      payload: { parent_session_id: parent, task: "count the files" },
    })) as { child_session_id: string; started: boolean; depth: number };
    const child = spawned.child_session_id;
    expect(spawned).toMatchObject({ started: true, depth: 1 });
    expect(started.find((s) => s.session_id === child)?.parent).toMatchObject({ session_id: parent, run_id: "rp-run", depth: 1 });
    expect(runs.subscriptions.get(`sub-agents:state:${child}`)).toEqual({
      session_id: child,
      function_id: "harness::sub_agents::child_state",
    });

    // The console's agent screen reads the same data through the same calls it makes in a tab.
    const api = harness(iii as unknown as BrowserClient);
    expect(await api.state(child)).toEqual({ session_id: child, state: "assistant_streaming", turn_count: 0 });
    expect((await api.runRequest(child))?.parent?.session_id).toBe(parent);
    expect((await api.children(parent)).children).toEqual([
      expect.objectContaining({ child_session_id: child, state: "assistant_streaming", depth: 1, task: "count the files" }),
    ]);

    // A direct join waits for the child's end (woken by the subscription's notice, or reading it
    // at once if the end came first: the same answer). Its wait is bounded; one that ran out on a
    // slow box is asked again until the end shows.
    type Joined = { pending?: true; state?: string };
    const join = (timeout_ms: number) =>
      iii.trigger({ function_id: "harness::join", payload: { child_session_id: child, timeout_ms } }) as Promise<Joined>;
    const joined = join(20_000);
    const cur = (await runs.status(child))!;
    await runs.setStatus({ ...cur, state: "stopped", turn_count: 2, final_text: "There are 42 files." });
    const first = await joined;
    const ended = first.pending
      ? await until(
          async () => {
            const r = await join(0);
            return r.pending ? undefined : r;
          },
          "the child's end seen by join",
          30_000,
        )
      : first;
    expect(ended).toEqual({ child_session_id: child, state: "stopped", final_message: "There are 42 files.", turn_count: 2 });
    // Only the notice ends the child's subscription (sub-agents' handler of it); the console sees the end.
    await until(() => !runs.subscriptions.has(`sub-agents:state:${child}`), "the ended child's subscription ended", 30_000);
    expect(await api.state(child)).toMatchObject({ state: "stopped", turn_count: 2 });
    expect((await api.children(parent)).children).toEqual([expect.objectContaining({ child_session_id: child, state: "stopped" })]);
  });
});

describe("every built-in worker alone as a Node process (npm run worker -- <name>)", () => {
  let replay: ReplayServer;
  let engine: EngineServer;
  let iii: IIIClient;
  let app: IIIClient;
  const procs: ChildProcess[] = [];
  const logs = new Map<string, string>();
  const ran: string[] = [];

  beforeAll(async () => {
    replay = await startProviderReplay();
    engine = await startEngine({ env: { HARNESS_DISABLE: HARNESS_WORKERS.join(",") } });
    iii = registerWorker(engine.wsUrl, { workerName: "node-stack-client", otel: { enabled: false } });
    // Nothing of the harness is in the deployed Worker.
    const before = (await listedFunctions(iii)).map((f) => f.function_id);
    expect(
      before.filter((id) =>
        /^(run|turn|provisioning|provider|auth|policy|approval|session-tree|session-inbox|harness|budget|hook-fanout|context-compaction)::/.test(
          id,
        ),
      ),
    ).toEqual([]);

    const dir = mkdtempSync(path.join(tmpdir(), "harness-node-"));
    const rules = path.join(dir, "iii-permissions.yaml");
    writeFileSync(rules, PERMISSIONS);
    const env = {
      ...process.env,
      III_URL: `${engine.wsUrl}/`,
      III_STATE_DIR: engine.stateDir,
      OPENAI_BASE_URL: replay.openaiBaseUrl,
      OPENAI_API_KEY: "sk-node",
      CREDENTIALS_KEY: "node-stack-test-key-0123456789abcdef",
      III_PERMISSIONS_PATH: rules,
      SESSIONS_DB_PATH: path.join(dir, "sessions.sqlite"),
      PATH: `${path.join(repoRoot, "node_modules", ".bin")}${path.delimiter}${process.env.PATH ?? ""}`,
    };
    for (const name of HARNESS_WORKERS) {
      logs.set(name, "");
      const p = spawn("npm", ["run", "-s", "worker", "--", name], {
        cwd: repoRoot,
        env,
        detached: true,
        stdio: ["ignore", "pipe", "pipe"],
      });
      p.stdout?.on("data", (d) => logs.set(name, logs.get(name) + String(d)));
      p.stderr?.on("data", (d) => logs.set(name, logs.get(name) + String(d)));
      procs.push(p);
    }
    await until(
      () => HARNESS_WORKERS.every((n) => logs.get(n)!.includes(`worker ${n} connected`)) || undefined,
      `all ${HARNESS_WORKERS.length} connected:\n${[...logs].map(([n, l]) => `${n}: ${l}`).join("\n")}`,
      WORKER_START_MS,
      200,
    );
    app = weatherApp(engine, ran);
    await untilListed(iii, "every worker's functions and the app's", (fns) =>
      [
        "run::start",
        "provisioning::prepare",
        "provider::openai::stream",
        "auth::get_token",
        "policy::check_permissions",
        "approval::resolve",
        "session-tree::append",
        "harness::trigger",
        "budget::check",
        "hook-fanout::publish_collect",
        "context-compaction::compact_now",
        "harness::spawn",
        "weather::forecast",
      ].every((id) => fns.some((f) => f.function_id === id)),
    );
  }, 180_000);

  afterAll(async () => {
    for (const p of procs) {
      try {
        process.kill(-p.pid!, "SIGTERM");
      } catch {
        // gone
      }
    }
    await Promise.allSettled([iii?.shutdown(), app?.shutdown()]);
    await engine?.stop();
    await replay?.close();
  });

  it("each registered its functions under its own process, and a turn with a function call runs through them", async () => {
    const fns = await listedFunctions(iii);
    const owner = (id: string) => fns.find((f) => f.function_id === id)?.worker_name;
    expect(owner("run::start")).toBe("turn-orchestrator");
    expect(owner("policy::check_permissions")).toBe("policy");
    expect(owner("session-tree::append")).toBe("session-storage");

    const ui = turnClient(engine, () => iii);
    replay.enqueue("openai", reply(callAgentTrigger("weather::forecast", { city: "Porto" }, "n-1")), reply(say("Porto is clear.")));
    await ui.startTurn("node-stack", "weather in Porto?");
    const { view } = await ui.finished("node-stack");
    expect(view.turn_count).toBe(2);
    expect(ran).toEqual(["node-stack"]);
    const msgs = await ui.transcript("node-stack");
    expect(msgs.map((m) => m.role)).toEqual(["user", "assistant", "function_result", "assistant"]);
    expect(textOf(msgs[3])).toBe("Porto is clear.");
    // The Node providers worker read its key from its own environment.
    expect(replay.requestsFor("openai")[0]!.headers.authorization).toBe("Bearer sk-node");
  });
});
