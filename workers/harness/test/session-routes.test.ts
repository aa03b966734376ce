// The HTTP routes on one session (`:session_id` in the path), called as their `http` triggers call
// them: a path id the run schema refuses is a 400 `invalid_session_id` and reaches no function; a
// good one is what the function behind the route is asked about, and its answer is the route's.
import type { InvocationContext } from "@iii-edge/sdk-edge/client";
import { describe, expect, it } from "vitest";
import { httpRequest } from "../src/http.ts";
import { ROUTES } from "../src/index.ts";

/** Every route whose path names a session, but the cassette export's: it hands the path on to
 * `cassette::export`, whose own schema answers for it. */
const SESSION_ROUTES = ROUTES.filter((r) => r.path.includes(":session_id") && r.id !== "harness::http::cassette_export");

/** A handler context whose calls are recorded and answered by `answer`. */
function recordingCtx(answer: (functionId: string, payload: unknown) => unknown) {
  const calls: { function_id: string; payload: unknown }[] = [];
  const ctx = {
    trigger: async (req: { function_id: string; payload?: unknown }) => {
      calls.push({ function_id: req.function_id, payload: req.payload });
      return answer(req.function_id, req.payload);
    },
  } as unknown as InvocationContext;
  return { ctx, calls };
}

const request = (session_id: string, body: unknown = {}) =>
  httpRequest({ path_params: { session_id }, query_params: {}, headers: {}, body: JSON.stringify(body) === "{}" ? null : body });

describe("routes on one session", () => {
  it("cover the turn, branch and export routes", () => {
    expect(SESSION_ROUTES.map((r) => r.id)).toEqual(
      expect.arrayContaining([
        "harness::http::turn_state",
        "harness::http::turn_events",
        "harness::http::steer",
        "harness::http::stop",
        "harness::http::resume",
        "harness::http::fork",
        "harness::http::session_tree",
        "harness::http::session_export",
      ]),
    );
  });

  for (const bad of ["", "a/b", "x".repeat(129)]) {
    it(`refuse the session id ${JSON.stringify(bad.length > 10 ? `${bad.slice(0, 5)}…(${bad.length})` : bad)} with 400 and call nothing`, async () => {
      for (const route of SESSION_ROUTES) {
        const { ctx, calls } = recordingCtx(() => ({}));
        const res = await route.handle(request(bad, { message: "hi" }), ctx);
        expect({ route: route.id, status: res.status_code, code: (res.body as { error?: { code?: string } }).error?.code }).toEqual({
          route: route.id,
          status: 400,
          code: "invalid_session_id",
        });
        expect(calls).toEqual([]);
      }
    });
  }

  it("ask the function behind the route about the path's session, and answer with what it said", async () => {
    const stop = ROUTES.find((r) => r.id === "harness::http::stop")!;
    const { ctx, calls } = recordingCtx(() => ({ stopped: true }));
    const res = await stop.handle(request("s-1"), ctx);
    expect(calls).toEqual([{ function_id: "turn::stop", payload: { session_id: "s-1" } }]);
    expect(res).toMatchObject({ status_code: 200, body: { stopped: true } });

    const state = ROUTES.find((r) => r.id === "harness::http::turn_state")!;
    const none = recordingCtx(() => null);
    expect(await state.handle(request("s-2"), none.ctx)).toMatchObject({
      status_code: 404,
      body: { error: { code: "session_not_found" } },
    });
    expect(none.calls).toEqual([{ function_id: "turn::get_state", payload: { session_id: "s-2" } }]);
  });
});
