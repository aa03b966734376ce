// Token counts against known values: the OpenAI cookbook's examples, whose counts it checked
// against the API's `prompt_tokens` (o200k: gpt-4o, cl100k: gpt-4 / gpt-3.5-turbo).
import type { AgentMessage } from "@iii-edge/protocol/harness";
import { describe, expect, it } from "vitest";
import { callingRound } from "@iii-edge/test-support/agent-messages";
import {
  ANTHROPIC_TOKEN_FACTOR,
  counterFor,
  loadEncoding,
  tokenizerSpec,
  wireRequestTokens,
  type WireMessage,
  type WireTool,
} from "../src/tokens.ts";
import { JARGON } from "./support/fixtures.ts";

const WEATHER_TOOLS: WireTool[] = [
  {
    type: "function",
    function: {
      name: "get_current_weather",
      description: "Get the current weather in a given location",
      parameters: {
        type: "object",
        properties: {
          location: { type: "string", description: "The city and state, e.g. San Francisco, CA" },
          unit: { type: "string", description: "The unit of temperature to return", enum: ["celsius", "fahrenheit"] },
        },
        required: ["location"],
      },
    },
  },
];
const WEATHER_MESSAGES: WireMessage[] = [
  { role: "system", content: "You are a helpful assistant that can answer to questions about the weather." },
  { role: "user", content: "What's the weather like in San Francisco?" },
];

async function rawCounter(name: "o200k_base" | "cl100k_base") {
  const enc = await loadEncoding(name);
  return (t: string) => (t ? enc.countTokens(t, { disallowedSpecial: new Set() }) : 0);
}

describe("OpenAI chat framing (cookbook values the API confirmed)", () => {
  it("messages with names: 124 tokens for gpt-4o (o200k), 129 for gpt-4 (cl100k)", async () => {
    expect(wireRequestTokens({ messages: JARGON }, "o200k_base", await rawCounter("o200k_base"))).toBe(124);
    expect(wireRequestTokens({ messages: JARGON }, "cl100k_base", await rawCounter("cl100k_base"))).toBe(129);
  });

  it("a request with a tool: 101 tokens for gpt-4o, 105 for gpt-4", async () => {
    expect(wireRequestTokens({ messages: WEATHER_MESSAGES, tools: WEATHER_TOOLS }, "o200k_base", await rawCounter("o200k_base"))).toBe(101);
    expect(wireRequestTokens({ messages: WEATHER_MESSAGES, tools: WEATHER_TOOLS }, "cl100k_base", await rawCounter("cl100k_base"))).toBe(
      105,
    );
  });

  it("raw BPE counts of known strings, special-token text counted as text", async () => {
    const o = await rawCounter("o200k_base");
    const c = await rawCounter("cl100k_base");
    expect(o("hello world")).toBe(2);
    expect(c("antidisestablishmentarianism")).toBe(6);
    expect(o("antidisestablishmentarianism")).toBe(6);
    expect(c("お誕生日おめでとう")).toBe(9);
    expect(o("お誕生日おめでとう")).toBe(8);
    expect(o("a <|endoftext|> b")).toBeGreaterThan(3); // not refused, not one special token
  });
});

describe("the model family's encoding", () => {
  it.each([
    ["openai", "gpt-4o", "o200k_base", 1],
    ["openai", "gpt-4o-mini", "o200k_base", 1],
    ["openai", "gpt-4.1", "o200k_base", 1],
    ["openai", "gpt-5", "o200k_base", 1],
    ["openai", "o3", "o200k_base", 1],
    ["openai", "o4-mini", "o200k_base", 1],
    ["openai", "gpt-4", "cl100k_base", 1],
    ["openai", "gpt-4-turbo", "cl100k_base", 1],
    ["openai", "gpt-3.5-turbo", "cl100k_base", 1],
    ["anthropic", "claude-sonnet-4-5", "o200k_base", ANTHROPIC_TOKEN_FACTOR],
  ] as const)("%s %s → %s × %s", (provider, id, encoding, factor) => {
    expect(tokenizerSpec({ provider, id })).toMatchObject({ encoding, factor });
  });

  it("other families are o200k × 1.15 (a local model behind the openai provider too)", () => {
    expect(tokenizerSpec({ provider: "lmstudio", id: "qwen3-8b" })).toEqual({ encoding: "o200k_base", family: "other", factor: 1.15 });
    expect(tokenizerSpec({ provider: "openai", id: "llama3.1" })).toMatchObject({ family: "other", factor: 1.15 });
  });
});

describe("AgentMessages counted as the providers send them", () => {
  const transcript: AgentMessage[] = [
    { role: "user", content: [{ type: "text", text: "What's the weather like in San Francisco?" }], timestamp: 1 },
    callingRound(
      { type: "thinking", text: "I should call the forecast." },
      { id: "call_1", function: "weather::forecast", payload: { city: "SF" } },
      { model: "gpt-4o", provider: "openai", timestamp: 2 },
    ),
    {
      role: "function_result",
      function_call_id: "call_1",
      function_id: "weather::forecast",
      content: [{ type: "text", text: '{"sky":"clear","high_c":21}' }],
      details: null,
      is_error: false,
      timestamp: 3,
    },
  ];

  it("equals the wire count of the same request (openai mapping: thinking not sent back)", async () => {
    const counter = await counterFor({ provider: "openai", id: "gpt-4o" });
    const wire: WireMessage[] = [
      { role: "system", content: "You are a weather agent." },
      { role: "user", content: "What's the weather like in San Francisco?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          {
            id: "call_1",
            type: "function",
            function: { name: "agent_trigger", arguments: JSON.stringify({ function: "weather::forecast", payload: { city: "SF" } }) },
          },
        ],
      },
      { role: "tool", tool_call_id: "call_1", content: '{"sky":"clear","high_c":21}' },
    ];
    const expected = wireRequestTokens({ messages: wire, tools: WEATHER_TOOLS }, "o200k_base", await rawCounter("o200k_base"));
    expect(counter.request({ system: "You are a weather agent.", messages: transcript, tools: WEATHER_TOOLS })).toBe(expected);
    // AgentFunction schemas count the same as their chat `tools` form.
    const fn = WEATHER_TOOLS[0].function!;
    expect(counter.fixed(null, [{ name: fn.name, description: fn.description, parameters: fn.parameters }])).toBe(
      counter.fixed(null, WEATHER_TOOLS),
    );
  });

  it("anthropic: the o200k count × 1.3, thinking included", async () => {
    const oa = await counterFor({ provider: "openai", id: "gpt-4o" });
    const an = await counterFor({ provider: "anthropic", id: "claude-sonnet-4-5" });
    const user = transcript[0];
    expect(an.message(user)).toBe(Math.ceil(oa.message(user) * 1.3));
    expect(an.message(transcript[1])).toBeGreaterThan(Math.ceil(oa.message(transcript[1]) * 1.3));
  });

  it("custom messages cost nothing; images a fixed 765", async () => {
    const c = await counterFor({ provider: "openai", id: "gpt-4o" });
    expect(c.message({ role: "custom", custom_type: "note", content: "x".repeat(1000), timestamp: 0 })).toBe(0);
    const withImage = c.message({
      role: "user",
      content: [
        { type: "text", text: "see" },
        { type: "image", mime: "image/png", data: "AAAA" },
      ],
      timestamp: 0,
    });
    const without = c.message({ role: "user", content: [{ type: "text", text: "see" }], timestamp: 0 });
    expect(withImage - without).toBe(765);
  });

  // How fast is tests/bench/compaction-bench.ts's to say; here, that a long transcript is counted
  // whole: twice the text is twice the tokens, give or take the join.
  it("a transcript of over 100k tokens is counted whole", async () => {
    const c = await counterFor({ provider: "openai", id: "gpt-4o" });
    const text = Array.from({ length: 12_000 }, (_, i) => `line ${i % 1000}: the function returned {"ok":true}`).join("\n");
    const n = c.text(text);
    expect(n).toBeGreaterThan(100_000);
    const doubled = c.text(`${text}\n${text}`);
    expect(Math.abs(doubled - 2 * n)).toBeLessThanOrEqual(2);
  });
});
