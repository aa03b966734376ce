// What the functions answer is what their contracts say (protocol/src/harness/session-storage.ts): each
// function is registered with a response_format, and every answer of a short session's life — created,
// appended to, paged, forked, compacted, pruned, its inbox used — parses under its function's response
// schema. The worker over node:sqlite, called through the handlers it registers, as the engine would.
import {
  sessionCompactionsResponse,
  sessionCompactResponse,
  sessionStorageContracts,
  sessionTreeContracts,
  sessionUpdatePartsResponse,
} from "@iii-edge/protocol/harness";
import type { WorkerFunctionOptions, WorkerHandler, WorkerSurface } from "@iii-edge/sdk-edge/worker";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { z } from "zod";
import { registerSessionStorage } from "../src/index.ts";
import { openSqliteStore } from "../src/sqlite-store.ts";

const responses: Record<string, z.ZodType> = {
  ...Object.fromEntries(Object.entries(sessionStorageContracts).map(([id, c]) => [id, c.response])),
  ...Object.fromEntries(Object.entries(sessionTreeContracts).map(([id, c]) => [id, c.response])),
  "session-tree::compact": sessionCompactResponse,
  "session-tree::compactions": sessionCompactionsResponse,
  "session-tree::update_parts": sessionUpdatePartsResponse,
};

describe("session-storage answers as its contracts say", () => {
  const registered = new Map<string, { handler: WorkerHandler; options?: WorkerFunctionOptions }>();
  const answered = new Set<string>();
  let close: () => void = () => {};
  // Trusted code (no caller principal); owner lookups of a copy find no owner.
  const ctx = { trigger: async () => null } as never;

  /** Call a registered function as the engine would (a JSON round trip) and check its answer. */
  async function call(id: string, payload: unknown): Promise<unknown> {
    const f = registered.get(id);
    if (!f) throw new Error(`${id} is not registered`);
    const answer: unknown = JSON.parse(JSON.stringify((await f.handler(JSON.parse(JSON.stringify(payload)), ctx)) ?? null));
    const schema = responses[id];
    expect(schema, `${id} has a response schema`).toBeDefined();
    const parsed = schema!.safeParse(answer);
    expect(parsed.success, `${id} answered ${JSON.stringify(answer)}: ${parsed.error?.message}`).toBe(true);
    answered.add(id);
    return answer;
  }

  beforeAll(() => {
    const opened = openSqliteStore(":memory:");
    close = opened.close;
    const surface = {
      runtime: "node",
      env: {},
      registerFunction: (id: string, handler: WorkerHandler, options?: WorkerFunctionOptions) => registered.set(id, { handler, options }),
      registerTrigger: () => {},
      trigger: async () => null,
    } as unknown as WorkerSurface;
    let n = 0;
    registerSessionStorage(surface, { store: opened.store, now: () => 1_000 + ++n, newId: () => `id-${++n}` });
  });
  afterAll(() => close());

  it("publishes a response_format for every function it registers", () => {
    expect(registered.size).toBeGreaterThan(10);
    for (const [id, f] of registered) expect(f.options?.response_format, id).toBeTypeOf("object");
  });

  it("every answer of a session's life parses under its function's response schema", async () => {
    const sid = "contract-s1";
    const user = (text: string) => ({ role: "user", content: [{ type: "text", text }], timestamp: 1 });
    const tool = (callId: string) => ({
      role: "function_result",
      function_call_id: callId,
      function_id: "test::echo",
      content: [{ type: "text", text: "x".repeat(2_000) }],
      details: null,
      is_error: false,
      timestamp: 2,
    });

    await call("session-tree::ensure", { session_id: sid, display_name: "Contract" });
    await call("session-tree::get", { session_id: "contract-missing" });
    const first = (await call("session-tree::append", { session_id: sid, message: user("hello") })) as { entry_id: string };
    await call("session-tree::append_many", {
      session_id: sid,
      entries: [
        { entry_id: "e-tool", message: tool("c1") },
        { entry_id: "e-user2", message: user("again") },
      ],
    });
    await call("session-tree::update_message", { session_id: sid, entry_id: first.entry_id, message: user("hello, edited") });
    await call("session-tree::get", { session_id: sid });
    await call("session-tree::list", {});
    await call("session-tree::messages", { session_id: sid, limit: 2 });

    await call("session-inbox::push", { name: "steering", session_id: sid, item: "steer" });
    await call("session-inbox::peek", { name: "steering", session_id: sid });
    await call("session-inbox::drain", { name: "steering", session_id: sid });

    await call("session-tree::tree", { session_id: sid });
    await call("session-tree::branches", { session_id: sid });
    await call("session-tree::get_entry", { session_id: sid, entry_id: first.entry_id });
    await call("session-tree::get_entry", { session_id: sid, entry_id: "no-such-entry" });
    await call("session-tree::fork", { source_session_id: sid, from_entry_id: first.entry_id, request_key: "k1" });
    await call("session-tree::clone", { source_session_id: sid, request_key: "k2" });
    await call("session-tree::set_active_leaf", { session_id: sid, entry_id: first.entry_id });
    await call("session-tree::set_active_leaf", { session_id: sid, entry_id: "e-user2" });
    await call("session-tree::export", { session_id: sid, format: "json" });
    await call("session-tree::export_html", { session_id: sid });

    await call("session-tree::compact", {
      session_id: sid,
      summary: "They said hello twice.",
      tokens_before: 1234,
      tail_start_id: "e-user2",
      details: { read_files: ["a.txt"], modified_files: [] },
    });
    await call("session-tree::compactions", { session_id: sid });
    await call("session-tree::update_parts", { session_id: sid, parts: [{ entry_id: "e-tool" }] });

    expect([...answered].sort()).toEqual(Object.keys(responses).sort());
  });
});
