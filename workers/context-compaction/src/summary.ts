// The summariser's prompt (docs/harness-contracts.md §6.1 "Summarise"): an anchor that creates a summary or
// updates the previous one, a fixed Markdown template, and the head rendered as `[role]` lines. The
// head of a second compaction is only what came after the first one's tail start, so its request
// carries the previous summary + the new messages, never the whole history again.
import { AGENT_TRIGGER, type AgentMessage, type CompactionDetails, type ContentBlock } from "@iii-edge/protocol/harness";

/** The template's sections, in order; each is always present ("(none)" when empty). */
export const SUMMARY_SECTIONS = [
  "Goal",
  "Constraints & Preferences",
  "Progress",
  "Key Decisions",
  "Tool Calls Made",
  "Next Steps",
  "Critical Context",
  "Relevant Files",
] as const;

export const SUMMARY_TEMPLATE = [
  "## Goal",
  "## Constraints & Preferences",
  "## Progress",
  "### Done",
  "### In Progress",
  "### Blocked",
  "## Key Decisions",
  "## Tool Calls Made",
  "## Next Steps",
  "## Critical Context",
  "## Relevant Files",
].join("\n");

const RULES = [
  "Write the summary in exactly this Markdown template, every heading present, in this order:",
  "",
  SUMMARY_TEMPLATE,
  "",
  "Rules: under each heading write terse bullets, or `(none)` when there is nothing. Keep exact file paths, commands, function ids, error messages, identifiers and numbers as written. Record what the user asked for and every constraint they set. Do not mention this summary, the summarising, or that messages were left out.",
].join("\n");

/** The marker the update anchor opens with (tests and readers look for it). */
export const PREVIOUS_SUMMARY_TAG = "previous-summary";

export function summarySystemPrompt(previous: string | null): string {
  const intro =
    "You write the working memory of an AI agent: a summary of the conversation below that lets the agent continue the task with only this summary and the most recent messages.";
  const anchor =
    previous === null
      ? "Create a new summary of the conversation."
      : [
          "The earlier part of this conversation is already summarised below. Update that previous summary with the new messages: keep what is still true, drop what is stale or superseded, and merge in the new facts. Answer with the complete updated summary, not a diff.",
          "",
          `<${PREVIOUS_SUMMARY_TAG}>`,
          previous,
          `</${PREVIOUS_SUMMARY_TAG}>`,
        ].join("\n");
  return [intro, anchor, RULES].join("\n\n");
}

export function summaryUserPrompt(renderedHead: string): string {
  return `<conversation>\n${renderedHead}\n</conversation>\n\nWrite the summary now.`;
}

function clipText(text: string, max: number): string {
  if (text.length <= max) return text;
  return `${text.slice(0, max)}… (${text.length - max} more characters)`;
}

const oneLine = (v: unknown, max: number): string => {
  let text: string;
  try {
    text = typeof v === "string" ? v : (JSON.stringify(v) ?? String(v));
  } catch {
    text = String(v);
  }
  return clipText(text.replace(/\s*\n\s*/g, " "), max);
};

/** A call as the summariser reads it: `agent_trigger {function, payload}` is shown as its target. */
function callLine(b: Extract<ContentBlock, { type: "function_call" }>, max: number): string {
  let args = b.arguments;
  if (typeof args === "string") {
    try {
      args = JSON.parse(args) as unknown;
    } catch {
      // shown as given
    }
  }
  if (
    b.function_id === AGENT_TRIGGER &&
    args &&
    typeof args === "object" &&
    typeof (args as { function?: unknown }).function === "string"
  ) {
    const a = args as { function: string; payload?: unknown };
    return `[tool_call] ${a.function} ${oneLine(a.payload ?? {}, max)}`;
  }
  return `[tool_call] ${b.function_id} ${oneLine(args ?? {}, max)}`;
}

const textOfBlocks = (blocks: readonly ContentBlock[]): string =>
  blocks
    .map((b) => (b.type === "text" ? b.text : b.type === "image" ? "[image]" : ""))
    .filter((t) => t !== "")
    .join("\n");

/** One message as lines of the `<conversation>`: images stripped, thinking left out, each output
 * clipped to `toolOutputMaxChars`. */
export function renderMessage(m: AgentMessage, toolOutputMaxChars: number): string {
  const blocks = Array.isArray(m.content) ? (m.content as ContentBlock[]) : [];
  switch (m.role) {
    case "user": {
      const lines: string[] = [];
      for (const b of blocks)
        if (b.type === "function_result") lines.push(`[tool_result] ${clipText(textOfBlocks(b.content ?? []), toolOutputMaxChars)}`);
      const text = textOfBlocks(blocks);
      if (text) lines.push(`[user] ${text}`);
      return lines.join("\n");
    }
    case "assistant": {
      const lines: string[] = [];
      const text = textOfBlocks(blocks);
      if (text) lines.push(`[assistant] ${text}`);
      for (const b of blocks) if (b.type === "function_call") lines.push(callLine(b, toolOutputMaxChars));
      return lines.join("\n");
    }
    case "function_result":
      return `[tool_result] ${m.function_id}${m.is_error ? " (error)" : ""}: ${clipText(textOfBlocks(blocks), toolOutputMaxChars)}`;
    default:
      return "";
  }
}

/**
 * The head as chunks of rendered lines: one summariser call per chunk, each updating the summary of
 * the chunks before it. The first chunk may take `firstMaxTokens` (its system prompt holds the
 * previous summary as it is); later ones `maxTokens` (room for a summary grown to its full size).
 * A single line longer than its chunk is clipped to fit.
 */
export function chunkHead(
  head: readonly AgentMessage[],
  opts: { toolOutputMaxChars: number; firstMaxTokens: number; maxTokens: number; count: (s: string) => number },
): string[] {
  const chunks: string[] = [];
  let lines: string[] = [];
  let size = 0;
  const budget = () => (chunks.length === 0 ? opts.firstMaxTokens : opts.maxTokens);
  for (const m of head) {
    let line = renderMessage(m, opts.toolOutputMaxChars);
    if (!line) continue;
    let n = opts.count(line) + 1;
    const max = Math.min(opts.firstMaxTokens, opts.maxTokens);
    if (n > max) {
      // Cut by characters in proportion, then confirm by count.
      let chars = Math.max(1, Math.floor((line.length * max) / n) - 64);
      let clipped = clipText(line, chars);
      while (opts.count(clipped) + 1 > max && chars > 1) {
        chars = Math.floor(chars / 2);
        clipped = clipText(line, chars);
      }
      line = clipped;
      n = opts.count(line) + 1;
    }
    if (size + n > budget() && lines.length > 0) {
      chunks.push(lines.join("\n"));
      lines = [];
      size = 0;
    }
    lines.push(line);
    size += n;
  }
  if (lines.length > 0) chunks.push(lines.join("\n"));
  return chunks;
}

const READ_WORDS = /(^|[_:.-])(read|get|cat|view|open|list|ls|glob|grep|search|find)([_:.-]|$)/i;
const WRITE_WORDS = /(^|[_:.-])(write|edit|patch|create|delete|remove|rm|move|mv|rename|append|apply|save|put)([_:.-]|$)/i;
const PATH_KEYS = ["path", "file_path", "filePath", "file", "filename", "target", "destination"] as const;

/** File operations of the head's calls, so the summary keeps which files were read and changed:
 * the path argument of read-like and write-like function ids, merged into the previous compaction's
 * lists (deduplicated, newest last, bounded). */
export function extractFileOps(head: readonly AgentMessage[], previous: CompactionDetails | null, maxFiles: number): CompactionDetails {
  const read = new Set(previous?.read_files ?? []);
  const modified = new Set(previous?.modified_files ?? []);
  for (const m of head) {
    if (m.role !== "assistant") continue;
    for (const b of m.content) {
      if (b.type !== "function_call") continue;
      let fn = b.function_id;
      let args: unknown = b.arguments;
      if (typeof args === "string") {
        try {
          args = JSON.parse(args) as unknown;
        } catch {
          continue;
        }
      }
      if (fn === AGENT_TRIGGER && args && typeof args === "object") {
        const a = args as { function?: unknown; payload?: unknown };
        if (typeof a.function !== "string") continue;
        fn = a.function;
        args = a.payload;
      }
      if (!args || typeof args !== "object") continue;
      const rec = args as Record<string, unknown>;
      const path = PATH_KEYS.map((k) => rec[k]).find((v): v is string => typeof v === "string" && v !== "");
      if (!path) continue;
      const name = fn.split("::").at(-1) ?? fn;
      if (WRITE_WORDS.test(name)) {
        modified.delete(path);
        modified.add(path);
      } else if (READ_WORDS.test(name)) {
        read.delete(path);
        read.add(path);
      }
    }
  }
  const last = (s: Set<string>) => [...s].slice(-maxFiles);
  return { ...(previous ?? {}), read_files: last(read), modified_files: last(modified) };
}

/** The synthetic user prompt after a sync compaction that summarised the request being answered:
 * it quotes the request (clipped) so the model keeps working on it. */
export function continuePrompt(replayTarget: AgentMessage | undefined, maxChars: number): string {
  const quoted = replayTarget
    ? clipText(textOfBlocks(Array.isArray(replayTarget.content) ? (replayTarget.content as ContentBlock[]) : []), maxChars)
    : "";
  return [
    "The conversation so far was compacted into the summary above to fit the context window.",
    quoted ? `The latest request was:\n<request>\n${quoted}\n</request>` : "",
    "Continue the task from where you left off. If something you need was lost, ask for clarification.",
  ]
    .filter((s) => s !== "")
    .join("\n\n");
}
