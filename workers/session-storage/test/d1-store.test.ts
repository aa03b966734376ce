// The session store over D1 as workerd runs it: Miniflare's local D1 (the same simulator
// `wrangler dev` gives the Worker), bound to a small Worker in that workerd, which runs each batch the
// store sends on the real binding (`env.DB.batch`: one transaction, D1's own errors and value types).
// d1Store runs here in Node over a D1Like whose statements travel to that Worker on one WebSocket,
// one message a batch. Miniflare's binding proxy (`mf.getD1Database`) would be simpler, but it makes a
// blocking round trip for every `prepare` and `bind` as well: the suite took 45 s that way, nearly
// all of it in the proxy.
import { Miniflare, convertV4MiniflareOptions } from "miniflare";
import { afterAll } from "vitest";
import { type D1Like, type D1StatementLike, d1Store } from "../src/sql-store.ts";
import { sessionStoreConformance } from "./store-conformance.ts";

/** The Worker holding the binding: a socket whose every message is `{id, statements}`, answered with
 * `{id, results}` (D1's result objects) or `{id, error}` (what D1 threw). */
const BATCH_WORKER = `
export default {
  fetch(request, env) {
    const [client, server] = Object.values(new WebSocketPair());
    server.accept();
    server.addEventListener("message", async (event) => {
      const { id, statements } = JSON.parse(event.data);
      try {
        const results = await env.DB.batch(statements.map((s) => env.DB.prepare(s.sql).bind(...s.params)));
        server.send(JSON.stringify({ id, results }));
      } catch (e) {
        server.send(JSON.stringify({ id, error: String(e?.message ?? e) }));
      }
    });
    return new Response(null, { status: 101, webSocket: client });
  },
};`;

interface Statement extends D1StatementLike {
  sql: string;
  params: unknown[];
}

/** A D1Like over the batch Worker's socket: `prepare` and `bind` only record, `batch` is one message. */
function d1OverSocket(ws: WebSocket): D1Like {
  const pending = new Map<number, { resolve(r: { results?: unknown[] }[]): void; reject(e: Error): void }>();
  let next = 0;
  ws.addEventListener("message", (event) => {
    const m = JSON.parse(String(event.data)) as { id: number; results?: { results?: unknown[] }[]; error?: string };
    const p = pending.get(m.id);
    pending.delete(m.id);
    if (m.error !== undefined) p?.reject(new Error(m.error));
    else p?.resolve(m.results ?? []);
  });
  ws.addEventListener("close", () => {
    for (const p of pending.values()) p.reject(new Error("the D1 Worker's socket closed"));
    pending.clear();
  });
  const statement = (sql: string, params: unknown[]): Statement => ({ sql, params, bind: (...values) => statement(sql, values) });
  return {
    prepare: (sql) => statement(sql, []),
    batch: (statements) =>
      new Promise((resolve, reject) => {
        const id = ++next;
        pending.set(id, { resolve, reject });
        ws.send(JSON.stringify({ id, statements: (statements as Statement[]).map(({ sql, params }) => ({ sql, params })) }));
      }),
  };
}

let mf: Miniflare | undefined;
let socket: WebSocket | undefined;
afterAll(async () => {
  socket?.close();
  await mf?.dispose();
});

sessionStoreConformance("D1 (workerd)", async () => {
  mf = new Miniflare(
    convertV4MiniflareOptions({
      modules: true,
      compatibilityDate: "2026-10-01",
      script: BATCH_WORKER,
      d1Databases: { DB: "sessions-conformance" },
    }),
  );
  const url = await mf.ready;
  const ws = new WebSocket(url.href.replace(/^http/, "ws"));
  socket = ws;
  await new Promise<void>((resolve, reject) => {
    ws.addEventListener("open", () => resolve(), { once: true });
    ws.addEventListener("error", () => reject(new Error("could not open the D1 Worker's socket")), { once: true });
  });
  return d1Store(d1OverSocket(ws));
});
