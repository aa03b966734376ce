// Helpers for driving the engine with iii-sdk 0.22.1 exactly as an application would. The suites
// run the engine with auth on (tests/support/auth.ts): every worker presents a signed token.
import { registerWorker, type IIIClient, type InitOptions } from "iii-sdk";
import { bearer, token } from "@iii-edge/test-support/auth";
import { until } from "@iii-edge/test-support/wait";

export type Worker = IIIClient;

/**
 * A worker with a token for `name` in its handshake headers (iii-sdk's `headers` option), and OTel
 * off: the SDK's separate telemetry socket to /otel cannot send headers, so against an engine with
 * auth on it would be refused (401) and retry forever; the tests need no telemetry anyway.
 */
export async function worker(url: string, name: string, opts: Omit<InitOptions, "workerName" | "otel"> = {}): Promise<Worker> {
  return registerWorker(url, {
    workerName: name,
    otel: { enabled: false },
    invocationTimeoutMs: 10_000,
    headers: bearer(await token(name)),
    ...opts,
  });
}

/** POST /_iii/invoke with a token for `sub` (or the token given), as curl would. */
export async function invokeHttp(baseUrl: string, body: unknown, tok?: string): Promise<Response> {
  return fetch(`${baseUrl}/_iii/invoke`, {
    method: "POST",
    headers: { "content-type": "application/json", ...bearer(tok ?? (await token("http-caller"))) },
    body: JSON.stringify(body),
  });
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export { until } from "@iii-edge/test-support/wait";

/** Function ids the engine lists right now. */
export async function listed(w: Worker): Promise<string[]> {
  const r = (await w.trigger({ function_id: "engine::functions::list", payload: { include_internal: true } })) as {
    functions: { function_id: string }[];
  };
  return r.functions.map((f) => f.function_id);
}

/** Resolves once every id is registered (registrations are fire-and-forget on the wire). */
export function registered(w: Worker, ...ids: string[]): Promise<boolean> {
  return until(
    async () => {
      const have = await listed(w);
      return ids.every((id) => have.includes(id));
    },
    `functions ${ids.join(", ")}`,
  );
}

/** The error a rejected call carries: `code` is the wire code (iii-sdk InvocationError). */
export async function failure(p: Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await p;
  } catch (e) {
    return e as { code: string; message: string };
  }
  throw new Error("expected the call to fail");
}
