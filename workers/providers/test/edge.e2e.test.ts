// The built-in copies: providers and auth-credentials running inside the Worker (deploy/harness.ts,
// workerd, no socket), configured by `npm start`'s environment, streaming from the local replay.
// Shows the modules run in workerd unchanged (Web APIs only) and that the settings reach them.
import type { AssistantMessageEvent, ProviderStreamResponse } from "@iii-edge/protocol/harness";
import { channelUrl } from "@iii-edge/sdk-edge/channels";
import { runWorkers, type RunningWorkers } from "@iii-edge/sdk-edge/worker-node";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { callAgentTrigger, rateLimited, reply, say, startProviderReplay, type ReplayServer } from "@iii-edge/test-support/provider-replay";
import { until } from "@iii-edge/test-support/wait";

const OPENAI_KEY = "sk-test-edge-openai-Vd8Kq2Lm5";
const ANTHROPIC_KEY = "sk-ant-edge-test-Hw3Pz7Rn1";

let replay: ReplayServer;
let engine: EngineServer;
let caller: RunningWorkers;

beforeAll(async () => {
  replay = await startProviderReplay();
  engine = await startEngine({
    env: {
      OPENAI_BASE_URL: replay.openaiBaseUrl,
      OPENAI_API_KEY: OPENAI_KEY,
      ANTHROPIC_BASE_URL: replay.anthropicBaseUrl,
      ANTHROPIC_API_KEY: ANTHROPIC_KEY,
      CREDENTIALS_KEY: "Yp4Tq8Wm2Xc6Vb1Nz9Lk3Hj7",
    },
  });
  caller = runWorkers(engine.wsUrl, [], { workerName: "providers-edge-test" });
  await until(
    async () => {
      const r = await caller.client.trigger<unknown, { functions: { function_id: string; worker_name?: string }[] }>({
        function_id: "engine::functions::list",
        payload: { prefix: "provider::" },
      });
      return r.functions.some((f) => f.function_id === "provider::anthropic::stream");
    },
    "the Worker-hosted providers are listed",
    30_000,
  );
});

afterAll(async () => {
  await caller?.shutdown();
  await engine?.stop();
  await replay?.close();
});

async function stream(
  provider: "openai" | "anthropic",
  model: string,
): Promise<{ frames: AssistantMessageEvent[]; result: ProviderStreamResponse }> {
  const ch = await caller.surface.channels.create();
  const ws = new WebSocket(channelUrl(engine.wsUrl, ch.reader));
  const frames: AssistantMessageEvent[] = [];
  const ended = new Promise<void>((resolve) => {
    ws.addEventListener("message", (e: MessageEvent) => {
      const f = JSON.parse(String(e.data)) as AssistantMessageEvent;
      frames.push(f);
      if (f.type === "done" || f.type === "error") ws.close(1000), resolve();
    });
    ws.addEventListener("close", () => resolve());
  });
  await new Promise((r) => ws.addEventListener("open", r, { once: true }));
  const result = await caller.client.trigger<unknown, ProviderStreamResponse>({
    function_id: `provider::${provider}::stream`,
    payload: { writer_ref: ch.writer, model, messages: [{ role: "user", content: [{ type: "text", text: "hi" }], timestamp: 1 }] },
    timeoutMs: 60_000,
  });
  await ended;
  return { frames, result };
}

it("the Worker-hosted providers stream from OPENAI_BASE_URL / ANTHROPIC_BASE_URL with the environment's keys", async () => {
  replay.enqueue("openai", reply(say("edge says hi"), callAgentTrigger("weather::get", { city: "Paris" }, "call_e1")));
  const a = await stream("openai", "gpt-4o");
  expect(a.result).toEqual({ ok: true, status: "done" });
  const done = a.frames.at(-1);
  expect(done?.type === "done" && done.message.content).toEqual([
    { type: "text", text: "edge says hi" },
    {
      type: "function_call",
      id: "call_e1",
      function_id: "agent_trigger",
      arguments: { function: "weather::get", payload: { city: "Paris" } },
    },
  ]);
  expect(replay.requestsFor("openai").at(-1)!.headers.authorization).toBe(`Bearer ${OPENAI_KEY}`);

  replay.enqueue("anthropic", rateLimited({ ms: 50 }), reply(say("and so does anthropic")));
  const b = await stream("anthropic", "claude-sonnet-4-5");
  expect(b.frames.at(-1)).toMatchObject({ type: "done", message: { content: [{ type: "text", text: "and so does anthropic" }] } });
  expect(replay.requestsFor("anthropic").at(-1)!.headers["x-api-key"]).toBe(ANTHROPIC_KEY);
});

it("the Worker-hosted auth::get_token refuses a caller without the key's proof", async () => {
  await expect(caller.client.trigger({ function_id: "auth::get_token", payload: { provider: "openai" } })).rejects.toMatchObject({
    code: "forbidden",
  });
  expect(await caller.client.trigger({ function_id: "auth::status", payload: { provider: "openai" } })).toEqual({
    configured: true,
    source: "environment",
    label: "api-key:sk-tes…",
  });
});
