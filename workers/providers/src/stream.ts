// One `provider::<name>::stream` call, whatever the wire format: open the channel, fetch the
// credential, send the request (retrying a 429/5xx while nothing has streamed yet), decode the SSE
// into AssistantMessageEvents written one JSON text item each, end with exactly one terminal frame,
// close. It never throws once the channel is open: every failure becomes the terminal `error`.
import { IIIError, isRecord, formatIssues } from "@iii-edge/protocol";
import { PROVIDER_CIRCUIT_OPEN } from "@iii-edge/protocol/harness";
import {
  credentialSchema,
  providerStreamRequest,
  type AssistantMessageEvent,
  type Credential,
  type CredentialsCryptoKey,
  type ProviderStreamResponse,
} from "@iii-edge/protocol/harness";
import { tracerOf, type ChannelWriter, type WorkerSurface, signAuthProof } from "@iii-edge/sdk-edge/worker";
import type { InvocationContext } from "@iii-edge/sdk-edge/client";
import { clip, type ProviderAdapter } from "./adapter.ts";
import { AssistantBuilder } from "./assistant.ts";
import type { CircuitBreaker } from "./breaker.ts";
import type { Catalog } from "./catalog.ts";
import { classify, StreamFailure } from "./errors.ts";
import { normaliseMessages, normaliseTools } from "./messages.ts";
import { readEvents } from "./sse.ts";

/** §6.4: the credential lookup is one engine hop; longer means the auth worker is stuck. */
export const AUTH_TIMEOUT_MS = 5_000;
/** Bound on an error body read into a frame (its message is clipped further). */
const MAX_ERROR_BODY_BYTES = 64 * 1024;

export interface StreamLimits {
  /** docs/harness-contracts.md §4.2: no upstream byte for this long (also waiting for the response) ends the
   * stream. */
  idle_timeout_ms: number;
  /** docs/harness-contracts.md §4.2: a whole stream, retries included; the orchestrator waits 300 s for the
   * call. */
  total_timeout_ms: number;
  /** Attempts before a 429/5xx/unreachable server is reported: one try and two retries clear a
   * blip; a real outage reaches the user within seconds rather than minutes. */
  max_attempts: number;
  /** First backoff; doubles per attempt, jittered to 50–100 % so many streams do not retry in step. */
  retry_base_delay_ms: number;
  retry_max_delay_ms: number;
  /** A `retry-after` longer than this is not waited out: the user hears "rate limited" instead. */
  max_retry_after_ms: number;
}

export const DEFAULT_LIMITS: StreamLimits = {
  idle_timeout_ms: 120_000,
  total_timeout_ms: 300_000,
  max_attempts: 3,
  retry_base_delay_ms: 500,
  retry_max_delay_ms: 8_000,
  max_retry_after_ms: 30_000,
};

export interface StreamDeps {
  iii: WorkerSurface;
  adapter: ProviderAdapter;
  base_url: string;
  catalog: Catalog;
  /** The key that signs `auth::get_token` proofs, or why there is none. */
  proofKey: () => Promise<CredentialsCryptoKey | string>;
  limits: StreamLimits;
  /** This provider's breaker (./breaker.ts): consulted before a request, told how the stream went. */
  breaker: CircuitBreaker;
  now: () => number;
  random: () => number;
}

/** When to retry after a 429/5xx: the server's `retry-after-ms`/`retry-after` if it gave one (and
 * it is short enough), else jittered exponential backoff. undefined = do not retry. */
export function retryDelay(headers: Headers, attempt: number, limits: StreamLimits, random: () => number, now: number): number | undefined {
  let asked: number | undefined;
  const ms = headers.get("retry-after-ms");
  const after = headers.get("retry-after");
  if (ms && Number.isFinite(Number(ms))) asked = Number(ms);
  else if (after) {
    const seconds = Number(after);
    if (Number.isFinite(seconds)) asked = seconds * 1000;
    else if (!Number.isNaN(Date.parse(after))) asked = Math.max(0, Date.parse(after) - now);
  }
  if (asked !== undefined) return asked <= limits.max_retry_after_ms ? Math.max(0, asked) : undefined;
  const exp = Math.min(limits.retry_max_delay_ms, limits.retry_base_delay_ms * 2 ** (attempt - 1));
  return Math.round(exp * (0.5 + 0.5 * random()));
}

async function readBounded(res: Response): Promise<string> {
  if (!res.body) return "";
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  let bytes = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      bytes += value.byteLength;
      text += decoder.decode(value, { stream: true });
      if (bytes >= MAX_ERROR_BODY_BYTES) break;
    }
  } finally {
    reader.cancel().catch(() => {});
  }
  return text;
}

type Stopped = "idle" | "total" | "cancelled";

/** The assistant message as it stood when the stream ended, and where the request went. */
interface ChatOutcome {
  message?: AssistantBuilder["message"];
  host?: string;
  attempts?: number;
}

/** The `gen_ai.response.finish_reasons` value of a harness stop reason (OTel's spelling). */
const FINISH_REASON: Record<string, string> = {
  end: "stop",
  length: "length",
  function_call: "tool_calls",
  aborted: "cancelled",
  error: "error",
};

/**
 * One stream as a `chat {model}` client span (OTel GenAI inference span): provider, model, token
 * usage and finish reason; the credential lookup and catalog reads made meanwhile are its children.
 */
export async function runProviderStream(deps: StreamDeps, data: unknown, ctx: InvocationContext): Promise<ProviderStreamResponse> {
  const tracer = tracerOf(deps.iii);
  const model = isRecord(data) && typeof data.model === "string" ? data.model : "";
  const span = tracer.startSpan(model ? `chat ${model}` : "chat", {
    kind: "client",
    attributes: {
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": deps.adapter.name,
      "gen_ai.request.model": model,
      "iii.function_id": `provider::${deps.adapter.name}::stream`,
    },
  });
  if (isRecord(data) && typeof data.max_tokens === "number") span.setAttribute("gen_ai.request.max_tokens", data.max_tokens);
  const outcome: ChatOutcome = {};
  try {
    const res = await tracer.withParent(span, () => streamChat(deps, data, ctx, outcome));
    const m = outcome.message;
    if (outcome.host) span.setAttribute("server.address", outcome.host);
    if (outcome.attempts !== undefined) span.setAttribute("iii.provider.attempts", outcome.attempts);
    if (m) {
      if (m.model) span.setAttribute("gen_ai.response.model", m.model);
      span.setAttribute("gen_ai.response.finish_reasons", [FINISH_REASON[m.stop_reason] ?? m.stop_reason]);
      if (typeof m.usage?.input === "number") span.setAttribute("gen_ai.usage.input_tokens", m.usage.input);
      if (typeof m.usage?.output === "number") span.setAttribute("gen_ai.usage.output_tokens", m.usage.output);
      if (typeof m.usage?.cost_usd === "number") span.setAttribute("iii.usage.cost_usd", m.usage.cost_usd);
    }
    span.setAttribute("iii.provider.status", res.status);
    if (res.status === "error") {
      span.setAttribute("error.type", res.error_kind ?? "_OTHER");
      span.setStatus("error", m?.error_message ?? "the provider stream failed");
    } else if (res.status !== "done") {
      span.setAttribute("error.type", res.status);
    }
    return res;
  } catch (e) {
    span.recordException(e);
    throw e;
  } finally {
    span.end();
  }
}

/** The most event JSON one batched channel item holds (a larger event goes alone). */
export const FRAME_BATCH_BYTES = 64 * 1024;

async function streamChat(deps: StreamDeps, data: unknown, ctx: InvocationContext, chat: ChatOutcome): Promise<ProviderStreamResponse> {
  const { adapter, iii, limits } = deps;
  const ref = providerStreamRequest.shape.writer_ref.safeParse(isRecord(data) ? data.writer_ref : undefined);
  if (!ref.success)
    throw new IIIError(
      "invalid_input",
      `provider::${adapter.name}::stream needs writer_ref, the write end of a channel ({channel_id, access_key, direction:"write"})`,
    );

  let writer: ChannelWriter;
  try {
    writer = await iii.channels.openWriter(ref.data);
  } catch (e) {
    console.warn(
      `provider::${adapter.name}::stream: cannot attach to channel ${ref.data.channel_id}: ${e instanceof Error ? e.message : String(e)}`,
    );
    return { ok: true, status: "channel_unavailable" };
  }

  // Everything that stops the upstream request: the reader leaving, the idle and total timeouts.
  const abort = new AbortController();
  let stopped: Stopped | undefined;
  const stop = (why: Stopped) => {
    if (stopped) return;
    stopped = why;
    abort.abort();
  };
  let finished = false;
  void writer.closed.then(() => {
    if (!finished) stop("cancelled");
  });
  let idleTimer: ReturnType<typeof setTimeout> | undefined;
  const touch = () => {
    clearTimeout(idleTimer);
    idleTimer = setTimeout(() => stop("idle"), limits.idle_timeout_ms);
  };
  const totalTimer = setTimeout(() => stop("total"), limits.total_timeout_ms);

  let secret: string | undefined;
  const redact = (text: string) => (secret && secret.length >= 4 ? text.split(secret).join("[redacted]") : text);
  const send = (text: string) => {
    try {
      writer.write(text);
    } catch {
      stop("cancelled"); // the reader left: nobody hears the rest
    }
  };
  // Asked with `batch_frames`: the events one chunk of the body made (they come in one synchronous
  // run) go as one array item, released at the next microtask or once FRAME_BATCH_BYTES are held —
  // one channel message instead of one per event.
  let batched = false;
  let held: string[] = [];
  let heldBytes = 0;
  const release = () => {
    if (held.length === 0) return;
    const items = held;
    held = [];
    heldBytes = 0;
    send(items.length === 1 ? items[0] : `[${items.join(",")}]`);
  };
  let firstDelta = true;
  const emit = (event: AssistantMessageEvent) => {
    if (stopped === "cancelled") return;
    const text = JSON.stringify(event);
    if (!batched) return send(text);
    if (held.length === 0) queueMicrotask(release);
    held.push(text);
    heldBytes += text.length;
    // The answer's first delta goes at once (with what came before it): the reader shows it while
    // the rest of the chunk is still being decoded.
    const first = firstDelta && event.type.endsWith("_delta");
    if (first) firstDelta = false;
    if (first || heldBytes >= FRAME_BATCH_BYTES) release();
  };

  const parsed = providerStreamRequest.safeParse(data);
  batched = parsed.success && parsed.data.batch_frames === true;
  const meta = { provider: adapter.name, model: parsed.success ? parsed.data.model : "", timestamp: deps.now() };
  // Replaced (before it emits anything) by one that knows the model's pricing once the catalog answered.
  let builder = new AssistantBuilder(emit, meta);
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      if (abort.signal.aborted) return resolve();
      const t = setTimeout(resolve, ms);
      abort.signal.addEventListener("abort", () => (clearTimeout(t), resolve()), { once: true });
    });
  const stoppedFailure = (): StreamFailure =>
    stopped === "idle"
      ? new StreamFailure("transient", `${adapter.name}: no data from the provider for ${limits.idle_timeout_ms / 1000} s`)
      : new StreamFailure("transient", `${adapter.name}: the response took longer than ${limits.total_timeout_ms / 1000} s`);

  // Whether the breaker let this stream through: only then does its end count for or against the
  // provider (a circuit-open refusal is not a new failure).
  let admitted = false;
  try {
    if (!parsed.success)
      throw new StreamFailure("permanent", `invalid request: ${formatIssues(parsed.error, { all: true, root: "payload" })}`);
    const req = parsed.data;
    const admission = deps.breaker.admit();
    if (!admission.ok)
      throw new StreamFailure(
        "transient",
        `${PROVIDER_CIRCUIT_OPEN}: ${adapter.name} failed ${admission.failures} streams in a row; not called again before ${new Date(admission.retry_at).toISOString()}`,
      );
    admitted = true;
    const messages = normaliseMessages(req.messages);
    const tools = normaliseTools(req.tools);

    const [credential, modelMeta] = await Promise.all([
      fetchCredential(deps, ctx),
      deps.catalog.forStream(ctx.trigger, adapter.name, req.model),
    ]);
    secret = credential.type === "api_key" ? credential.key : credential.access_token;
    const base = credential.type === "api_key" && credential.base_url ? credential.base_url : deps.base_url;
    const wire = adapter.request({
      model: req.model,
      system_prompt: req.system_prompt ?? null,
      messages,
      tools,
      max_tokens: req.max_tokens,
      ...(req.response_format ? { response_format: req.response_format } : {}),
      credential,
      base_url: base,
      model_meta: modelMeta,
    });
    const body = JSON.stringify(wire.body);
    builder = new AssistantBuilder(emit, meta, modelMeta?.pricing);
    let host: string;
    try {
      host = new URL(wire.url).host;
    } catch {
      throw new StreamFailure("permanent", `${adapter.name}: the base URL ${base} is not a URL`);
    }

    let response: Response | undefined;
    chat.host = host;
    for (let attempt = 1; ; attempt++) {
      chat.attempts = attempt;
      if (stopped) throw stoppedFailure();
      touch();
      let res: Response;
      try {
        res = await fetch(wire.url, { method: "POST", headers: wire.headers, body, signal: abort.signal });
      } catch (e) {
        if (stopped) throw stoppedFailure();
        const why = `${adapter.name}: cannot reach ${host}: ${networkReason(e)}`;
        if (attempt < limits.max_attempts) {
          clearTimeout(idleTimer);
          await sleep(retryDelay(new Headers(), attempt, limits, deps.random, deps.now())!);
          continue;
        }
        throw new StreamFailure("transient", why);
      }
      if (res.ok) {
        response = res;
        break;
      }
      const text = await readBounded(res).catch(() => "");
      const message = adapter.errorMessage(text);
      const retryable = res.status === 429 || res.status >= 500;
      if (retryable && attempt < limits.max_attempts) {
        const wait = retryDelay(res.headers, attempt, limits, deps.random, deps.now());
        if (wait !== undefined) {
          clearTimeout(idleTimer);
          await sleep(wait);
          continue;
        }
      }
      throw new StreamFailure(classify(res.status, message), `${adapter.name} HTTP ${res.status}${message ? `: ${message}` : ""}`);
    }
    if (!response.body) throw new StreamFailure("transient", `${adapter.name}: the response has no body`);
    const type = response.headers.get("content-type") ?? "";
    if (type.includes("application/json")) {
      // A server that ignored `stream: true`, or a gateway's error with a 200 status.
      const text = await readBounded(response);
      throw new StreamFailure(
        classify(undefined, adapter.errorMessage(text)),
        `${adapter.name}: expected an event stream, got JSON: ${adapter.errorMessage(text)}`,
      );
    }

    builder.start();
    const decoder = adapter.decoder(builder);
    let outcome: "complete" | "ended";
    try {
      outcome = await readEvents(response.body, (e) => decoder.event(e), touch);
    } catch (e) {
      if (e instanceof StreamFailure) throw e;
      if (stopped) throw stoppedFailure();
      throw new StreamFailure("transient", `${adapter.name}: the stream was cut: ${e instanceof Error ? e.message : String(e)}`);
    }
    if (outcome === "ended") decoder.end();
    finished = true;
    deps.breaker.succeeded();
    return { ok: true, status: "done" };
  } catch (e) {
    finished = true;
    if (stopped === "cancelled") {
      if (admitted) deps.breaker.released();
      return { ok: true, status: "cancelled" };
    }
    const failure =
      e instanceof StreamFailure ? e : new StreamFailure("transient", `${adapter.name}: ${e instanceof Error ? e.message : String(e)}`);
    // Rate limits, 5xx, unreachable servers, cuts and timeouts say the provider is unwell; a bad
    // request, a missing credential or an overflow say nothing about it.
    if (admitted) {
      if (failure.kind === "rate_limited" || failure.kind === "transient") deps.breaker.failed();
      else deps.breaker.released();
    }
    builder.fail(failure.kind, redact(failure.message));
    return { ok: true, status: "error", error_kind: failure.kind };
  } finally {
    chat.message = builder.message;
    clearTimeout(idleTimer);
    clearTimeout(totalTimer);
    abort.abort(); // releases the connection if the body was not read to its end
    release();
    writer.close();
  }
}

/** Why fetch() failed: undici puts the reason (ECONNREFUSED, a DNS error) in `cause`, where
 * "fetch failed" alone says nothing. */
function networkReason(e: unknown): string {
  if (!(e instanceof Error)) return String(e);
  const c = e.cause;
  const parts = [c instanceof Error ? c.message : "", isRecord(c) && typeof c.code === "string" ? c.code : ""].filter(
    (p, i, all) => p && all.indexOf(p) === i,
  );
  return parts.length > 0 ? parts.join(" ") : e.message;
}

/** `auth::get_token` with a proof; null → auth_expired "no credential configured for <provider>". */
async function fetchCredential(deps: StreamDeps, ctx: InvocationContext): Promise<Credential> {
  const provider = deps.adapter.name;
  const key = await deps.proofKey();
  if (typeof key === "string") throw new StreamFailure("permanent", `${provider}: cannot ask auth::get_token for a credential: ${key}`);
  const proof = await signAuthProof(key, provider, deps.now());
  let got: unknown;
  try {
    got = await ctx.trigger({ function_id: "auth::get_token", payload: { provider, proof }, timeoutMs: AUTH_TIMEOUT_MS });
  } catch (e) {
    const code = (e as { code?: unknown }).code;
    const message = clip(e instanceof Error ? e.message : String(e));
    if (code === "credential_unreadable") throw new StreamFailure("auth_expired", `${provider}: ${message}`);
    if (code === "forbidden" || code === "not_configured")
      throw new StreamFailure("permanent", `${provider}: auth::get_token refused: ${message}`);
    throw new StreamFailure("transient", `${provider}: auth::get_token failed (${typeof code === "string" ? code : "error"}): ${message}`);
  }
  if (got === null || got === undefined) {
    // A local OpenAI-compatible server (llama.cpp, Ollama, vLLM, LM Studio) usually wants no key:
    // with its own base URL and no credential, the request goes without one. OpenAI itself (and
    // Anthropic) without a credential is auth_expired, a re-login signal
    // (docs/harness-contracts.md §4.3).
    if (deps.adapter.keyless_with_custom_base_url && deps.base_url !== deps.adapter.default_base_url) return { type: "api_key", key: "" };
    throw new StreamFailure("auth_expired", `no credential configured for ${provider}`);
  }
  const c = credentialSchema.safeParse(got);
  if (!c.success) throw new StreamFailure("permanent", `${provider}: auth::get_token returned an unusable credential`);
  return c.data;
}
