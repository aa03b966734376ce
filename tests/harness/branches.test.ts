// Branches of a conversation end to end: exactly `npm start` (every harness worker inside the
// deployed Worker), the real OpenAI client against the local SSE replay, driven over the HTTP API as
// a UI would. A session of three turns is forked at an entry and both branches are resumed — each
// model request carries only its own branch's path; a user message is edited and re-run (time
// travel) while the old branch stays readable; a failed run is resumed; the path is exported as
// Markdown and HTML. The fork case runs again with session storage replaced by its Node process
// (`HARNESS_DISABLE=session-storage` + `npm run worker -- session-storage`, node:sqlite).
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { AgentMessage, SessionBranches, SessionTree } from "@iii-edge/protocol/harness";
import { registerWorker, type IIIClient } from "iii-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoRoot, startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { callAgentTrigger, permissionsFile, replayEnv, reply, say, startProviderReplay } from "@iii-edge/test-support/provider-replay";
import type { RecordedRequest, ReplayServer } from "@iii-edge/test-support/provider-replay";
import { until } from "@iii-edge/test-support/wait";
import { openaiMessages, textOf, turnClient, user } from "./turn-client.ts";

/** Weather calls run; anything else (mail::send) waits for a person. */
const PERMISSIONS = `version: 1
rules:
  - 'weather::*'
`;
/** A Node worker process starts (npm, Node, type stripping of its sources) within this. */
const WORKER_START_MS = 60_000;

interface Stack {
  engine: EngineServer;
  replay: ReplayServer;
  iii: IIIClient;
  ui: ReturnType<typeof turnClient>;
}

const post = (s: Stack, p: string, body?: unknown) =>
  fetch(
    `${s.engine.url}/${p}`,
    body === undefined
      ? { method: "POST" }
      : { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) },
  );

/** Text of a wire (OpenAI) message's content: a string, or parts. */
function wireText(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content))
    return content
      .map((p) => (p && typeof p === "object" && typeof (p as { text?: unknown }).text === "string" ? (p as { text: string }).text : ""))
      .join("");
  return "";
}
/** What a model request carried, system prompt left out: `role: text` per message. */
const sentPath = (r: RecordedRequest | undefined) =>
  openaiMessages(r)
    .filter((m) => m.role !== "system")
    .map((m) => `${m.role}: ${wireText(m.content)}`);
const lastRequest = (s: Stack) => s.replay.requestsFor("openai").at(-1);
const pathOf = async (s: Stack, sid: string) => (await s.ui.transcript(sid)).map((m) => `${m.role}: ${textOf(m)}`);

/** One turn with its own message id (run::start over POST /api/turns), run to its end. */
async function turn(s: Stack, sid: string, k: number, text: string, answer: string): Promise<void> {
  s.replay.enqueue("openai", reply(say(answer)));
  const res = await post(s, "api/turns", {
    session_id: sid,
    message_id: `${sid}-m${k}`,
    payload: { session_id: sid, message_id: `${sid}-m${k}`, model: "gpt-4o", provider: "openai", messages: [user(text)] },
  });
  expect(res.status, await res.clone().text()).toBe(200);
  await s.ui.finished(sid);
}

async function threeTurns(s: Stack, sid: string): Promise<void> {
  await turn(s, sid, 1, 'Plan a trip <b>now</b> & "fast"', "Where to?");
  await turn(s, sid, 2, "To Lisbon", "Lisbon it is.");
  await turn(s, sid, 3, "Three days", "Here is a 3-day plan.");
}
const THREE_TURNS = [
  'user: Plan a trip <b>now</b> & "fast"',
  "assistant: Where to?",
  "user: To Lisbon",
  "assistant: Lisbon it is.",
  "user: Three days",
  "assistant: Here is a 3-day plan.",
];

/** The fork case: fork a 3-turn session after its 2nd answer, resume both branches independently. */
async function forkAndResumeBoth(s: Stack, sid: string): Promise<string> {
  await threeTurns(s, sid);
  expect(await pathOf(s, sid)).toEqual(THREE_TURNS);
  const k = `e_${sid}-m2_1_assistant`;

  const forked = await post(s, `api/sessions/${sid}/fork`, { entry_id: k });
  expect(forked.status, await forked.clone().text()).toBe(200);
  const fork = (await forked.json()) as { session_id: string; leaf_id: string; created: boolean; entry_count: number };
  expect(fork).toMatchObject({ created: true, entry_count: 4, leaf_id: `${k}~3`, source_session_id: sid, from_entry_id: k });
  expect(fork.session_id).not.toBe(sid);
  // Forking again with the same request is the same fork: same id, nothing new written.
  const again = (await (await post(s, `api/sessions/${sid}/fork`, { entry_id: k })).json()) as { session_id: string; created: boolean };
  expect(again).toMatchObject({ session_id: fork.session_id, created: false });
  expect(await pathOf(s, fork.session_id)).toEqual(THREE_TURNS.slice(0, 4));

  // Resume the original: its next request carries its own whole path.
  s.replay.enqueue("openai", reply(say("Day 4: Sintra.")));
  const main = await post(s, `api/turns/${sid}/resume`, { message: "Add a fourth day" });
  expect(main.status, await main.clone().text()).toBe(200);
  expect(await main.json()).toMatchObject({ session_id: sid, started: true });
  await s.ui.finished(sid);
  expect(sentPath(lastRequest(s))).toEqual([...THREE_TURNS, "user: Add a fourth day"]);

  // Resume the fork (it never ran: it takes the source's model): only the path up to k, then its own message.
  s.replay.enqueue("openai", reply(say("Porto is 3 hours north.")));
  const other = await post(s, `api/turns/${fork.session_id}/resume`, { message: "Actually, Porto instead?" });
  expect(other.status, await other.clone().text()).toBe(200);
  await s.ui.finished(fork.session_id);
  const req = lastRequest(s);
  expect(req?.body?.model).toBe("gpt-4o");
  expect(sentPath(req)).toEqual([...THREE_TURNS.slice(0, 4), "user: Actually, Porto instead?"]);

  // Each transcript holds only its own continuation.
  expect(await pathOf(s, sid)).toEqual([...THREE_TURNS, "user: Add a fourth day", "assistant: Day 4: Sintra."]);
  expect(await pathOf(s, fork.session_id)).toEqual([
    ...THREE_TURNS.slice(0, 4),
    "user: Actually, Porto instead?",
    "assistant: Porto is 3 hours north.",
  ]);
  return fork.session_id;
}

async function startStack(env: Record<string, string> = {}): Promise<Stack> {
  const replay = await startProviderReplay();
  const rules = permissionsFile(PERMISSIONS);
  const engine = await startEngine({
    env: { ...replayEnv(replay), III_PERMISSIONS_PATH: rules, ...env },
  });
  const iii = registerWorker(engine.wsUrl, { workerName: "branches-e2e-client", otel: { enabled: false } });
  const ui = turnClient(engine, () => iii);
  await until(async () => (await fetch(`${engine.url}/api/turns/none`)).status === 404 || undefined, "the harness routes", 30_000, 200);
  return { engine, replay, iii, ui };
}

async function stopStack(s: Stack | undefined): Promise<void> {
  if (!s) return;
  await Promise.allSettled([s.iii.shutdown()]);
  await s.engine.stop();
  await s.replay.close();
}

describe("branches with the built-in workers (npm start)", () => {
  let s: Stack;
  let forkId: string;
  beforeAll(async () => {
    s = await startStack();
  });
  afterAll(() => stopStack(s));

  it("fork from entry k and resume both branches: each model request carries only its own path", async () => {
    forkId = await forkAndResumeBoth(s, "br-main");
    // The fork's tree is its own: one branch, no trace of the source's third turn.
    const tree = (await (await fetch(`${s.engine.url}/api/sessions/${forkId}/tree`)).json()) as SessionTree;
    expect(tree.roots).toHaveLength(1);
    expect(tree.roots[0]!.children).toEqual([]);
    expect(tree.roots[0]!.entries.map((e) => e.preview)).toEqual([
      'Plan a trip <b>now</b> & "fast"',
      "Where to?",
      "To Lisbon",
      "Lisbon it is.",
      "Actually, Porto instead?",
      "Porto is 3 hours north.",
    ]);
  });

  it("time travel: re-run from an earlier user message with an edit; the model sees the edit, the old branch stays", async () => {
    const sid = "br-main";
    const oldPath = await pathOf(s, sid);
    const edited = `e_${sid}-m2_user_0`;
    s.replay.enqueue("openai", reply(say("Madrid it is.")));
    const res = await post(s, `api/turns/${sid}/rerun`, { entry_id: edited, message: "To Madrid" });
    expect(res.status, await res.clone().text()).toBe(200);
    const answer = (await res.json()) as { started: boolean; run_id: string; entry_id: string; parent_id: string };
    expect(answer).toMatchObject({ session_id: sid, started: true, parent_id: `e_${sid}-m1_1_assistant` });
    // The same request again (a double click) starts nothing more.
    const repeat = await post(s, `api/turns/${sid}/rerun`, { entry_id: edited, message: "To Madrid" });
    expect(repeat.status).toBe(200);
    expect(await repeat.json()).toMatchObject({ started: false, reason: "already_started", run_id: answer.run_id });
    await s.ui.finished(sid);

    // What the model was sent: the path up to the edited message's parent, then the edit.
    expect(sentPath(lastRequest(s))).toEqual([THREE_TURNS[0], THREE_TURNS[1], "user: To Madrid"]);
    expect(s.replay.requestsFor("openai").filter((r) => sentPath(r).includes("user: To Madrid"))).toHaveLength(1);
    expect(await pathOf(s, sid)).toEqual([THREE_TURNS[0], THREE_TURNS[1], "user: To Madrid", "assistant: Madrid it is."]);

    // The old branch is untouched and still readable; the tree forks under the first answer.
    const tips = (await s.iii.trigger({ function_id: "session-tree::branches", payload: { session_id: sid } })) as SessionBranches;
    expect(tips.total).toBe(2);
    const old = tips.branches.find((b) => !b.active)!;
    expect(old.fork_point_id).toBe(`e_${sid}-m1_1_assistant`);
    const oldMessages = (await s.iii.trigger({
      function_id: "session-tree::messages",
      payload: { session_id: sid, branch_leaf: old.leaf_id },
    })) as { messages: { message: AgentMessage }[] };
    expect(oldMessages.messages.map((m) => `${m.message.role}: ${textOf(m.message)}`)).toEqual(oldPath);
    const tree = (await (await fetch(`${s.engine.url}/api/sessions/${sid}/tree`)).json()) as SessionTree;
    expect(tree.roots[0]!.entries.map((e) => e.entry_id)).toEqual([`e_${sid}-m1_user_0`, `e_${sid}-m1_1_assistant`]);
    expect(tree.roots[0]!.children.map((b) => b.entries[0]!.preview)).toEqual(["To Lisbon", "To Madrid"]);
    expect(tree.roots[0]!.children[1]!.entries.every((e) => e.active)).toBe(true);

    // Re-running the very first message makes a second root; the first one keeps both branches.
    s.replay.enqueue("openai", reply(say("Rome, then.")));
    const first = await post(s, `api/turns/${sid}/rerun`, { entry_id: `e_${sid}-m1_user_0`, message: "Plan a trip to Rome" });
    expect(first.status, await first.clone().text()).toBe(200);
    await s.ui.finished(sid);
    expect(sentPath(lastRequest(s))).toEqual(["user: Plan a trip to Rome"]);
    const roots = ((await (await fetch(`${s.engine.url}/api/sessions/${sid}/tree`)).json()) as SessionTree).roots;
    expect(roots.map((r) => r.entries[0]!.preview)).toEqual(['Plan a trip <b>now</b> & "fast"', "Plan a trip to Rome"]);
    // Back on the Madrid branch for the export below.
    const madridTip = tips.branches.find((b) => b.active)!.leaf_id;
    await s.iii.trigger({ function_id: "session-tree::set_active_leaf", payload: { session_id: sid, entry_id: madridTip } });
  });

  it("resume a failed session: the provider error, then a resume that succeeds on the same transcript", async () => {
    const sid = "br-failed";
    s.replay.enqueue("openai", {
      kind: "http",
      status: 400,
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        error: { message: "Unsupported parameter: frobnicate", type: "invalid_request_error", param: null, code: null },
      }),
    });
    const start = await post(s, "api/turns", {
      payload: { session_id: sid, message_id: `${sid}-m1`, model: "gpt-4o", provider: "openai", messages: [user("Summarise my week")] },
    });
    expect(start.status).toBe(200);
    const failed = await s.ui.finished(sid, "failed");
    expect(failed.view.error?.message).toContain("frobnicate");
    expect(await pathOf(s, sid)).toEqual(["user: Summarise my week"]);

    s.replay.enqueue("openai", reply(say("A calm week.")));
    const res = await post(s, `api/turns/${sid}/resume`); // a bare POST: no new message
    expect(res.status, await res.clone().text()).toBe(200);
    expect(await res.json()).toMatchObject({ session_id: sid, started: true });
    const { view } = await s.ui.finished(sid);
    expect(view).toMatchObject({ state: "stopped", turn_count: 1 });
    expect(view.error).toBeUndefined();
    expect(sentPath(lastRequest(s))).toEqual(["user: Summarise my week"]);
    expect(await pathOf(s, sid)).toEqual(["user: Summarise my week", "assistant: A calm week."]);
  });

  it("the busy guard: a parked run is neither resumed nor re-run; unknown sessions and entries are 404", async () => {
    const sid = "br-busy";
    s.replay.enqueue("openai", reply(callAgentTrigger("mail::send", { to: "eve" }, "mail-1")), reply(say("Sent.")));
    const start = await post(s, "api/turns", {
      payload: { session_id: sid, message_id: `${sid}-m1`, model: "gpt-4o", provider: "openai", messages: [user("mail eve")] },
    });
    expect(start.status).toBe(200);
    await s.ui.reached(sid, "function_awaiting_approval");
    const resume = await post(s, `api/turns/${sid}/resume`, { message: "hurry" });
    expect(resume.status).toBe(409);
    expect(await resume.json()).toMatchObject({ started: false, reason: "session_busy" });
    const rerun = await post(s, `api/turns/${sid}/rerun`, { entry_id: `e_${sid}-m1_user_0`, message: "mail bob" });
    expect(rerun.status).toBe(409);
    expect(await s.iii.trigger({ function_id: "session-tree::get", payload: { session_id: sid } })).toMatchObject({ branch_count: 1 });
    expect((await post(s, `api/turns/${sid}/stop`, {})).status).toBe(200);
    await s.ui.finished(sid);

    expect((await post(s, "api/turns/br-nobody/resume", {})).status).toBe(404);
    expect((await post(s, `api/turns/${sid}/rerun`, { entry_id: "ghost" })).status).toBe(404);
    expect((await post(s, `api/sessions/${sid}/fork`, { entry_id: "ghost" })).status).toBe(404);
    const notUser = await post(s, `api/turns/br-main/rerun`, { entry_id: "e_br-main-m1_1_assistant", message: "x" });
    expect(notUser.status).toBe(400);
    expect((await fetch(`${s.engine.url}/api/sessions/br-nobody/tree`)).status).toBe(404);
  });

  it("export: Markdown and HTML hold every message of the path; HTML is escaped", async () => {
    const sid = "br-main";
    const onPath = await s.ui.transcript(sid);
    expect(onPath.length).toBe(4);
    const md = await fetch(`${s.engine.url}/api/sessions/${sid}/export?format=markdown`);
    expect(md.status).toBe(200);
    expect(md.headers.get("content-type")).toContain("text/markdown");
    const mdText = await md.text();
    for (const m of onPath) expect(mdText).toContain(textOf(m));

    const html = await fetch(`${s.engine.url}/api/sessions/${sid}/export?format=html`);
    expect(html.status).toBe(200);
    expect(html.headers.get("content-type")).toContain("text/html");
    const page = await html.text();
    expect(page).toContain("Plan a trip &lt;b&gt;now&lt;/b&gt; &amp; &quot;fast&quot;");
    expect(page).not.toContain("<b>now</b>");
    for (const m of onPath.slice(1)) expect(page).toContain(textOf(m));
    expect(page).not.toContain("Lisbon it is."); // another branch

    // Another branch by its leaf; JSON; a bad format.
    const forkJson = await fetch(`${s.engine.url}/api/sessions/${forkId}/export?format=json`);
    const doc = (await forkJson.json()) as { entries: { message: AgentMessage }[] };
    expect(doc.entries.map((e) => textOf(e.message)).at(-1)).toBe("Porto is 3 hours north.");
    expect((await fetch(`${s.engine.url}/api/sessions/${sid}/export?format=pdf`)).status).toBe(400);
    expect((await fetch(`${s.engine.url}/api/sessions/${sid}/export?format=html&branch_leaf=ghost`)).status).toBe(404);
  });
});

describe("session storage replaced by its Node process (HARNESS_DISABLE=session-storage, node:sqlite)", () => {
  let s: Stack | undefined;
  let storage: ChildProcess | undefined;
  let log = "";
  beforeAll(async () => {
    s = await startStack({ HARNESS_DISABLE: "session-storage" });
    const dir = mkdtempSync(path.join(tmpdir(), "harness-branches-sqlite-"));
    storage = spawn("npm", ["run", "-s", "worker", "--", "session-storage"], {
      cwd: repoRoot,
      env: {
        ...process.env,
        III_URL: `${s.engine.wsUrl}/`,
        SESSIONS_DB_PATH: path.join(dir, "sessions.sqlite"),
        PATH: `${path.join(repoRoot, "node_modules", ".bin")}${path.delimiter}${process.env.PATH ?? ""}`,
      },
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    storage.stdout?.on("data", (d) => (log += String(d)));
    storage.stderr?.on("data", (d) => (log += String(d)));
    const stack = s;
    await until(
      async () => {
        const r = (await stack.iii.trigger({ function_id: "engine::functions::list", payload: {} })) as {
          functions: { function_id: string; worker_name?: string | null }[];
        };
        return r.functions.some((f) => f.function_id === "session-tree::fork" && f.worker_name === "session-storage");
      },
      `the Node session-storage worker's functions:\n${log}`,
      WORKER_START_MS,
      200,
    );
  }, 180_000);
  afterAll(async () => {
    if (storage?.pid !== undefined) {
      try {
        process.kill(-storage.pid, "SIGTERM");
      } catch {
        // gone
      }
    }
    await stopStack(s);
  });

  it("the same fork case: fork from entry k, resume both branches independently", async () => {
    await forkAndResumeBoth(s!, "br-node");
  });
});
