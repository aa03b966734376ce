// Skills in the prompt (docs/harness-contracts.md §6.5 layer 3): the directory's index, then each requested
// skill's body under a `# <id>` heading. The directory (iii-directory) is optional: a skill that
// cannot be fetched becomes a note telling the model to fetch it later.
import type { Trigger } from "./catalog.ts";
import { isRecord } from "@iii-edge/protocol";

/** Per skill fetch (docs/harness-contracts.md §1.3). */
export const SKILL_TIMEOUT_MS = 10_000;
/** One skill body in the prompt; a longer one is cut with a note to fetch the rest. */
export const MAX_SKILL_CHARS = 32_000;
/** The directory's index in the prompt. */
export const MAX_INDEX_CHARS = 16_000;

/** A directory answer: a string, or `{body}`. */
const bodyOf = (v: unknown): string | undefined =>
  typeof v === "string" ? v : isRecord(v) && typeof v.body === "string" ? v.body : undefined;

const clip = (text: string, max: number, how: string) =>
  text.length > max ? `${text.slice(0, max)}\n\n(cut at ${max} characters: ${how})` : text;

export const skillPlaceholder = (id: string): string =>
  `(This skill could not be loaded when the run started. Fetch it when you need it: agent_trigger {"function": "directory::skills::get", "payload": {"id": ${JSON.stringify(id)}}}.)`;

/**
 * The skills appendix. `present` is the set of registered ids (null: unknown), so a directory that
 * is not running costs no wait.
 */
export async function renderSkills(trigger: Trigger, ids: readonly string[], present: Set<string> | null): Promise<string | undefined> {
  const has = (id: string) => present === null || present.has(id);
  const index = has("directory::skills::index")
    ? trigger<unknown>("directory::skills::index", {}, SKILL_TIMEOUT_MS).then(
        (v) => bodyOf(v) ?? (v === undefined || v === null ? undefined : JSON.stringify(v)),
        () => undefined,
      )
    : Promise.resolve(undefined);
  const bodies = ids.map((id) =>
    has("directory::skills::get")
      ? trigger<unknown>("directory::skills::get", { id }, SKILL_TIMEOUT_MS).then(
          (v) => bodyOf(v),
          () => undefined,
        )
      : Promise.resolve(undefined),
  );
  const [indexText, ...texts] = await Promise.all([index, ...bodies]);
  if (indexText === undefined && ids.length === 0) return undefined;
  const parts: string[] = ["# Skills"];
  if (indexText !== undefined && indexText.trim() !== "")
    parts.push(clip(indexText.trim(), MAX_INDEX_CHARS, "call directory::skills::index for all of it"));
  ids.forEach((id, i) => {
    const text = texts[i];
    parts.push(
      `# ${id}\n\n${text === undefined || text.trim() === "" ? skillPlaceholder(id) : clip(text.trim(), MAX_SKILL_CHARS, "fetch the rest with directory::skills::get")}`,
    );
  });
  return parts.join("\n\n");
}
