// The plain Worker baseline of triggers-bench.mjs: bench-worker.ts answers BENCH_PLAIN_PATH with
// this JSON without touching the engine object; the bench's http-trigger route answers the same
// through the engine. Bench only: the production engine (engine-do/src/http-routes.ts) has no such route.
export const BENCH_PLAIN_PATH = "/_iii/bench/plain";
export const BENCH_PLAIN_BODY = { ok: true, message: "hello from iii-edge" };
/** The same JSON from a Durable Object: the Worker calls EchoBench (bench-worker.ts) by RPC and
 * answers what it returns — the floor of any route served by an object, without the engine. */
export const BENCH_OBJECT_PATH = "/_iii/bench/object";
