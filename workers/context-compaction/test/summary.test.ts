// The summariser's prompt: the template, the create/update anchor, the head's rendering.
import type { AgentMessage } from "@iii-edge/protocol/harness";
import { describe, expect, it } from "vitest";
import {
  chunkHead,
  continuePrompt,
  extractFileOps,
  renderMessage,
  SUMMARY_SECTIONS,
  summarySystemPrompt,
  summaryUserPrompt,
} from "../src/summary.ts";

const call = (fn: string, payload: unknown): AgentMessage => ({
  role: "assistant",
  content: [
    { type: "text", text: "Let me look." },
    { type: "thinking", text: "secret plan" },
    { type: "function_call", id: "c1", function_id: "agent_trigger", arguments: { function: fn, payload } },
  ],
  stop_reason: "function_call",
  model: "m",
  provider: "openai",
  timestamp: 0,
});

describe("the prompt", () => {
  it("every template section, in order; a fresh summary or an update of the previous one", () => {
    const fresh = summarySystemPrompt(null);
    let at = -1;
    for (const s of SUMMARY_SECTIONS) {
      const i = fresh.indexOf(`## ${s}`);
      expect(i, s).toBeGreaterThan(at);
      at = i;
    }
    for (const sub of ["### Done", "### In Progress", "### Blocked"]) expect(fresh).toContain(sub);
    expect(fresh).toContain("Create a new summary");
    expect(fresh).toContain("(none)");
    const update = summarySystemPrompt("## Goal\n- ship it");
    expect(update).toContain("keep what is still true, drop what is stale");
    expect(update).toContain("<previous-summary>\n## Goal\n- ship it\n</previous-summary>");
    expect(update).not.toContain("Create a new summary");
    expect(summaryUserPrompt("[user] hi")).toBe("<conversation>\n[user] hi\n</conversation>\n\nWrite the summary now.");
  });

  it("renders [role] lines: calls unwrapped from agent_trigger, thinking and images left out, outputs clipped", () => {
    expect(renderMessage(call("files::read", { path: "/a.ts" }), 2_000)).toBe(
      '[assistant] Let me look.\n[tool_call] files::read {"path":"/a.ts"}',
    );
    const long: AgentMessage = {
      role: "function_result",
      function_call_id: "c1",
      function_id: "files::read",
      content: [
        { type: "text", text: "x".repeat(3_000) },
        { type: "image", mime: "image/png", data: "AAA" },
      ],
      details: null,
      is_error: true,
      timestamp: 0,
    };
    const line = renderMessage(long, 2_000);
    expect(line.startsWith("[tool_result] files::read (error): xxx")).toBe(true);
    expect(line).toContain("… (");
    expect(line.length).toBeLessThan(2_100);
    expect(
      renderMessage(
        {
          role: "user",
          content: [
            { type: "text", text: "hi" },
            { type: "image", mime: "image/png", data: "AAA" },
          ],
          timestamp: 0,
        },
        2_000,
      ),
    ).toBe("[user] hi\n[image]");
    expect(renderMessage({ role: "custom", custom_type: "x", content: "never", timestamp: 0 }, 2_000)).toBe("");
  });

  it("chunks a head by token budget; the first chunk may be larger; an over-long line is clipped", () => {
    const count = (s: string) => Math.ceil(s.length / 4);
    const head: AgentMessage[] = Array.from({ length: 10 }, (_, i) => ({
      role: "user",
      content: [{ type: "text", text: `${i}`.repeat(396) }],
      timestamp: 0,
    }));
    const chunks = chunkHead(head, { toolOutputMaxChars: 2_000, firstMaxTokens: 420, maxTokens: 210, count });
    expect(chunks.length).toBe(4); // 4 lines of 102 tokens, then 2 per chunk
    expect(count(chunks[0])).toBeLessThanOrEqual(420);
    for (const c of chunks.slice(1)) expect(count(c)).toBeLessThanOrEqual(210);
    expect(chunks.join("\n")).toContain("[user] 9");
    const huge = chunkHead([{ role: "user", content: [{ type: "text", text: "y".repeat(10_000) }], timestamp: 0 }], {
      toolOutputMaxChars: 2_000,
      firstMaxTokens: 420,
      maxTokens: 210,
      count,
    });
    expect(huge).toHaveLength(1);
    expect(count(huge[0]) + 1).toBeLessThanOrEqual(210);
  });
});

describe("file operations and the continue prompt", () => {
  it("read- and write-like calls' paths, merged into the previous lists, newest last", () => {
    const head = [
      call("sandbox::read_file", { path: "/a.ts" }),
      call("files::write", { file_path: "/b.ts" }),
      call("files::delete", { path: "/a.ts" }),
      call("weather::forecast", { path: "/nope" }),
    ];
    expect(extractFileOps(head, { read_files: ["/old.ts"], modified_files: ["/b.ts", "/c.ts"] }, 100)).toEqual({
      read_files: ["/old.ts", "/a.ts"],
      modified_files: ["/c.ts", "/b.ts", "/a.ts"],
    });
  });

  it("quotes the request being answered", () => {
    const p = continuePrompt({ role: "user", content: [{ type: "text", text: "refactor the parser" }], timestamp: 0 }, 100);
    expect(p).toContain("<request>\nrefactor the parser\n</request>");
    expect(p).toContain("Continue the task");
  });
});
