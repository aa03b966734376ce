// The session store over D1 as workerd runs it (Miniflare's local D1, the same simulator
// `wrangler dev` gives the Worker), reached from Node through Miniflare's binding proxy.
import { Miniflare, convertV4MiniflareOptions } from "miniflare";
import { afterAll } from "vitest";
import { d1Store, isD1 } from "../src/sql-store.ts";
import { sessionStoreConformance } from "./store-conformance.ts";

let mf: Miniflare | undefined;
afterAll(() => mf?.dispose());

sessionStoreConformance("D1 (workerd)", async () => {
  mf = new Miniflare(
    convertV4MiniflareOptions({
      modules: true,
      compatibilityDate: "2026-10-01",
      script: "export default { fetch() { return new Response(null, { status: 204 }) } }",
      d1Databases: { DB: "sessions-conformance" },
    }),
  );
  const db: unknown = await mf.getD1Database("DB");
  if (!isD1(db)) throw new Error("Miniflare did not hand out a D1 binding");
  return d1Store(db);
});
