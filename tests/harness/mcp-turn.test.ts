// An MCP server's tools in an agent turn: the MCP client worker (workers/mcp, as `npm run worker --
// mcp` runs it) registers an official-SDK McpServer's tools as mcp::calc::*, and a replayed model
// calls them through `agent_trigger` like any function — the permissions file allowing one outright
// and sending the other to a person for approval.
import type { FunctionResultMessage } from "@iii-edge/protocol/harness";
import { run } from "@iii-edge/worker-mcp/node";
import { registerWorker, type IIIClient } from "iii-sdk";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { httpFixture, type HttpFixture } from "../node/mcp-fixture-http.ts";
import { freePort, startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { callAgentTrigger, reply, say, startProviderReplay, type ReplayServer } from "@iii-edge/test-support/provider-replay";
import { permissionsFile, replayEnv } from "@iii-edge/test-support/provider-replay";
import { until } from "@iii-edge/test-support/wait";
import { asText, openaiMessages, turnClient, TURN_DEADLINE_MS } from "./turn-client.ts";

const PERMISSIONS = `version: 1
rules:
  - '!approval::*'
  - mcp::calc::add
# anything else (mcp::calc::mul) waits for a person
`;

let replay: ReplayServer;
let engine: EngineServer;
let calc: HttpFixture;
let mcp: ReturnType<typeof run>;
let iii: IIIClient;
let ui: ReturnType<typeof turnClient>;

beforeAll(async () => {
  const rules = permissionsFile(PERMISSIONS);
  [replay, calc] = await Promise.all([startProviderReplay(), freePort().then(httpFixture)]);
  calc.addTool("mul");
  engine = await startEngine({ env: { ...replayEnv(replay), III_PERMISSIONS_PATH: rules } });
  iii = registerWorker(engine.wsUrl, { workerName: "mcp-turn-client", otel: { enabled: false }, enableMetricsReporting: false });
  ui = turnClient(engine, () => iii);
  mcp = run(engine.wsUrl, { workerName: "mcp", config: { mcp: { servers: [{ name: "calc", url: calc.url }], log: () => undefined } } });
  await until(
    async () => {
      const r = (await iii.trigger({ function_id: "engine::functions::list", payload: { prefix: "mcp::calc::" } })) as {
        functions: unknown[];
      };
      return r.functions.length === 2;
    },
    "the MCP server's tools in the catalog",
    30_000,
  );
  await until(async () => (await fetch(`${engine.url}/api/turns/none`)).status === 404 || undefined, "the harness routes", 30_000, 200);
});

afterAll(async () => {
  await Promise.allSettled([mcp?.shutdown(), iii?.shutdown()]);
  await engine?.stop();
  await Promise.allSettled([calc?.stop(), replay?.close()]);
});

beforeEach(() => replay.reset());

describe("MCP tools in a turn", () => {
  it("allowed by the policy: the model calls mcp::calc::add through agent_trigger and reads the tool's result", async () => {
    const sid = "mcp-add";
    replay.enqueue("openai", reply(callAgentTrigger("mcp::calc::add", { a: 2, b: 40 }, "c-1")), reply(say("It is 42.")));
    await ui.startTurn(sid, "what is 2 + 40?");
    const { view } = await ui.finished(sid);
    expect(view.turn_count).toBe(2);
    const fr = (await ui.transcript(sid)).find((m) => m.role === "function_result") as FunctionResultMessage;
    expect(fr).toMatchObject({ function_call_id: "c-1", is_error: false });
    const [first, second] = replay.requestsFor("openai");
    // The live catalog in the prompt: the tool, with the schema the MCP server declared.
    expect(asText(openaiMessages(first)[0]!.content)).toContain("mcp::calc::add");
    const tool = openaiMessages(second).find((m) => m.role === "tool");
    expect(tool?.tool_call_id).toBe("c-1");
    expect(asText(tool?.content)).toContain("42");
  });

  it("not in the rules: the call to mcp::calc::mul waits for a person, and runs once allowed", async () => {
    const sid = "mcp-mul";
    replay.enqueue("openai", reply(callAgentTrigger("mcp::calc::mul", { a: 6, b: 7 }, "c-2")), reply(say("6 × 7 = 42.")));
    await ui.startTurn(sid, "what is 6 × 7?");
    const parked = await ui.reached(sid, "function_awaiting_approval");
    expect(parked.awaiting_approval).toEqual([
      expect.objectContaining({ function_call_id: "c-2", function_id: "mcp::calc::mul", args: { a: 6, b: 7 } }),
    ]);
    expect(replay.requestsFor("openai")).toHaveLength(1);
    const res = await ui.post("api/approvals", { session_id: sid, function_call_id: "c-2", decision: "allow" });
    expect(res.status).toBe(200);
    await ui.finished(sid, "stopped", TURN_DEADLINE_MS);
    const tool = openaiMessages(replay.requestsFor("openai")[1]).find((m) => m.role === "tool");
    expect(asText(tool?.content)).toContain("42");
  });
});
