// The ids a spawn derives (docs/harness-contracts.md §2.2): a child session's id and its run's id are
// digests of what identifies the spawn, so a redelivered spawn finds the child it already started.
// Exported (`@iii-edge/worker-sub-agents/ids`) for whoever follows a spawn's child by its id.

/** Characters of the digest in a child id (80 bits: no collision among any realistic number). */
const CHILD_ID_DIGEST_CHARS = 20;

async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** The child session id of the spawn `function_call_id` made in the parent's run `parent_run_id`:
 * `<parent, cut to fit>~<digest>`, at most 128 characters. The same spawn always names the same
 * child; the same call id in another run names another. */
export async function subAgentSessionId(parentSessionId: string, parentRunId: string, functionCallId: string): Promise<string> {
  const digest = (await sha256Hex(`${parentSessionId}\n${parentRunId}\n${functionCallId}`)).slice(0, CHILD_ID_DIGEST_CHARS);
  return `${parentSessionId.slice(0, 128 - CHILD_ID_DIGEST_CHARS - 1)}~${digest}`;
}
/** The child run's `message_id` (its run id): derived from the child id, so a repeated start of the
 * same spawn is the same run. */
export async function subAgentMessageId(childSessionId: string): Promise<string> {
  return `sa_${(await sha256Hex(childSessionId)).slice(0, CHILD_ID_DIGEST_CHARS)}`;
}
