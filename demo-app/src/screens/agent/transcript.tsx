// The conversation of one session: user and assistant messages, the reply being streamed, and each
// function call as a card with its arguments, its status and its result; a call waiting for a
// person has Approve / Deny (any tab watching the session shows them; the first answer wins).
import type { AssistantMessage } from "@iii-edge/protocol/harness";
import { useMemo, useState } from "preact/hooks";
import { itemsToShow, textOfBlocks, visibleCalls, type CallView, type SessionView } from "./model.ts";

const STATUS_TEXT: Record<CallView["status"], string> = {
  proposed: "proposed",
  running: "running",
  awaiting: "waiting for approval",
  done: "done",
  error: "failed",
};

function Pre({ value, label }: { value: unknown; label: string }) {
  let text: string;
  try {
    text = value === undefined ? "–" : JSON.stringify(value, null, 2);
  } catch {
    text = String(value);
  }
  return (
    <div class="ac-kv">
      <span class="ac-kv-label">{label}</span>
      <pre class="ac-pre">{text}</pre>
    </div>
  );
}

function resultText(result: unknown): string | undefined {
  if (!result || typeof result !== "object") return undefined;
  const content = (result as { content?: unknown }).content;
  const t = textOfBlocks(content);
  return t || undefined;
}

export function CallCard(props: {
  call: CallView;
  onDecide?: (call: CallView, decision: "allow" | "deny") => Promise<void>;
  onOpenSession?: (sid: string) => void;
}) {
  const { call } = props;
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState<string>();
  const decide = async (d: "allow" | "deny") => {
    if (!props.onDecide) return;
    setBusy(true);
    setErr(undefined);
    try {
      await props.onDecide(call, d);
    } catch (e) {
      setErr(String((e as Error).message ?? e));
    } finally {
      setBusy(false);
    }
  };
  const text = resultText(call.result);
  return (
    <article
      class={`ac-call ac-call-${call.status}`}
      data-call-id={call.id}
      data-status={call.status}
      aria-label={`call ${call.function_id}, ${STATUS_TEXT[call.status]}`}
    >
      <header class="ac-call-head">
        <code class="ac-fn">{call.function_id}</code>
        <span class={`ac-status ac-status-${call.status}`}>{STATUS_TEXT[call.status]}</span>
        {call.duration_ms !== undefined && <span class="ac-muted">{call.duration_ms} ms</span>}
      </header>
      <Pre label="arguments" value={call.args} />
      {call.status === "awaiting" && call.child_session_id && (
        <p class="ac-muted">
          waiting for sub-agent{" "}
          <button type="button" class="btn btn-link" onClick={() => props.onOpenSession?.(call.child_session_id!)}>
            {call.child_session_id}
          </button>
        </p>
      )}
      {call.status === "awaiting" && !call.child_session_id && props.onDecide && (
        <div class="ac-approval" role="group" aria-label={`approve or deny ${call.function_id}`}>
          <button type="button" class="btn btn-primary" data-approve={call.id} disabled={busy} onClick={() => void decide("allow")}>
            Approve
          </button>
          <button type="button" class="btn btn-danger" data-deny={call.id} disabled={busy} onClick={() => void decide("deny")}>
            Deny
          </button>
          {err && (
            <span role="alert" class="ac-error">
              {err}
            </span>
          )}
        </div>
      )}
      {call.result !== undefined &&
        (text ? (
          <div class="ac-kv">
            <span class="ac-kv-label">result</span>
            <pre class="ac-pre ac-result">{text}</pre>
          </div>
        ) : (
          <Pre label="result" value={call.result} />
        ))}
    </article>
  );
}

function Streaming({ message }: { message: AssistantMessage }) {
  const text = textOfBlocks(message.content);
  const thinking = textOfBlocks(message.content, "thinking");
  return (
    <div class="ac-msg ac-msg-assistant ac-streaming" data-streaming="true" aria-busy="true">
      <span class="ac-role">assistant</span>
      {thinking && <p class="ac-thinking">{thinking}</p>}
      <p class="ac-text">{text}</p>
    </div>
  );
}

export function Transcript(props: {
  view: SessionView;
  onDecide?: (call: CallView, decision: "allow" | "deny") => Promise<void>;
  onFork?: (entryId: string) => void;
  onOpenSession?: (sid: string) => void;
}) {
  const { view } = props;
  // The settled part only changes when a message or call does; while a reply streams only the
  // streaming element re-renders (the same vnodes are handed back, which Preact skips).
  const settled = useMemo(() => {
    const items = itemsToShow(view);
    const calls = visibleCalls(view);
    return items.map((it) => {
      const entry = view.entryOf[it.key];
      const fork =
        entry && props.onFork ? (
          <button
            type="button"
            class="btn btn-link ac-fork"
            data-fork-entry={entry}
            onClick={() => props.onFork!(entry)}
            aria-label="fork the session from this message"
          >
            fork from here
          </button>
        ) : null;
      if (it.kind === "user")
        return (
          <div key={it.key} class="ac-msg ac-msg-user">
            <span class="ac-role">you</span>
            <p class="ac-text">{it.text}</p>
            {fork}
          </div>
        );
      if (it.kind === "assistant")
        return (
          <div key={it.key} class={`ac-msg ac-msg-assistant${it.stop_reason === "error" ? " ac-msg-error" : ""}`} data-final="true">
            <span class="ac-role" data-served-by={it.provider && it.model ? `${it.provider}:${it.model}` : undefined}>
              assistant{it.model ? ` · ${it.provider ? `${it.provider}:` : ""}${it.model}` : ""}
            </span>
            {it.thinking && <p class="ac-thinking">{it.thinking}</p>}
            <p class="ac-text">{it.text}</p>
            {it.error && <p class="ac-error">{it.error}</p>}
            {fork}
          </div>
        );
      if (it.kind === "call") {
        const c = calls[it.id];
        return c ? <CallCard key={it.key} call={c} onDecide={props.onDecide} onOpenSession={props.onOpenSession} /> : null;
      }
      if (it.kind === "failover")
        return (
          <p
            key={it.key}
            class="ac-notice ac-failover"
            role="status"
            data-failover-from={it.from}
            data-failover-to={it.to}
            data-reason={it.reason}
          >
            provider failover: {it.text}
          </p>
        );
      return (
        <p key={it.key} class="ac-notice">
          {it.text}
        </p>
      );
    });
  }, [view.history, view.live, view.calls, view.entryOf, view.state]);
  return (
    <div
      id="agent-transcript"
      class="ac-transcript"
      aria-live="polite"
      aria-relevant="additions"
      data-events={view.eventCount}
      data-state={view.state?.state ?? "none"}
    >
      {settled.length === 0 && !view.streaming && <p class="ac-muted">No messages yet.</p>}
      {settled}
      {view.streaming && <Streaming message={view.streaming} />}
    </div>
  );
}
