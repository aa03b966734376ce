// Fixtures several suites share: the cookbook's token-count example and a small model with the
// assistant messages it answers.
import type { AgentMessage, Model } from "@iii-edge/protocol/harness";
import type { WireMessage } from "../../src/tokens.ts";

/** The OpenAI cookbook's named-messages example, whose count it checked against the API's
 * `prompt_tokens`: 124 tokens in o200k (gpt-4o), 129 in cl100k (gpt-4). */
export const JARGON: WireMessage[] = [
  { role: "system", content: "You are a helpful, pattern-following assistant that translates corporate jargon into plain English." },
  { role: "system", name: "example_user", content: "New synergies will help drive top-line growth." },
  { role: "system", name: "example_assistant", content: "Things working well together will increase revenue." },
  {
    role: "system",
    name: "example_user",
    content: "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage.",
  },
  { role: "system", name: "example_assistant", content: "Let's talk later when we're less busy about how to do better." },
  { role: "user", content: "This late pivot means we don't have time to boil the ocean for the client deliverable." },
];

/** A 4 000-token window with 500 out: hard limit 3 500, usable 3 100, tail budget 1 550, prune
 * protect 1 240 / min free 620, summary max 620. */
export const TINY: Model = { id: "gpt-4o-tiny", provider: "openai", context_window: 4_000, max_output_tokens: 500 };

/** An assistant message of TINY that ends its turn with `text`. */
export const said = (text: string): AgentMessage => ({
  role: "assistant",
  content: [{ type: "text", text }],
  stop_reason: "end",
  model: TINY.id,
  provider: "openai",
  timestamp: 1,
});
