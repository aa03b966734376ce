// The cassette routes of the harness API (docs/cassettes.md), over the cassettes worker's
// `cassette::export` and `cassette::replay`: the route's caller is who exports and replays.
import { REPLAY_TIMEOUT_MS } from "@iii-edge/protocol/harness";
import { errorCode } from "@iii-edge/protocol";
import type { InvocationContext } from "@iii-edge/sdk-edge/client";
import { downstreamFailure, failure, jsonObjectBody, respond, type HttpEnvelope, type HttpRoute } from "./http.ts";

/** A replay waits for its run to end; the route waits a little longer than the replay does. */
export const REPLAY_ROUTE_TIMEOUT_MS = REPLAY_TIMEOUT_MS + 15_000;

/** A refusal the caller can act on, with its own status; anything else as any downstream failure. */
function refusal(functionId: string, e: unknown): HttpEnvelope {
  const code = errorCode(e);
  const message = e instanceof Error ? e.message : String(e);
  if (code === "turn_not_found") return failure(404, code, message);
  if (code === "turn_running") return failure(409, code, message);
  return downstreamFailure(functionId, e);
}

async function call(ctx: InvocationContext, functionId: string, payload: unknown, timeoutMs: number): Promise<HttpEnvelope> {
  try {
    return respond(200, await ctx.trigger({ function_id: functionId, payload, timeoutMs }));
  } catch (e) {
    return refusal(functionId, e);
  }
}

export const CASSETTE_ROUTES: readonly HttpRoute[] = [
  {
    id: "harness::http::cassette_export",
    method: "GET",
    path: "api/sessions/:session_id/turns/:turn_id/cassette",
    handle: (req, ctx) =>
      call(ctx, "cassette::export", { session_id: req.path_params.session_id, turn_id: req.path_params.turn_id }, 30_000),
  },
  {
    id: "harness::http::cassette_replay",
    method: "POST",
    path: "api/cassettes/replay",
    timeoutMs: REPLAY_ROUTE_TIMEOUT_MS,
    handle(req, ctx) {
      const body = jsonObjectBody(req);
      if (!body.ok) return Promise.resolve(body.response);
      return call(ctx, "cassette::replay", body.value, REPLAY_ROUTE_TIMEOUT_MS);
    },
  },
];
