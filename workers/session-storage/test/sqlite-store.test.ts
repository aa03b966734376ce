// The session store over node:sqlite (what the worker uses alone in Node): a fresh file per run.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll } from "vitest";
import { openSqliteStore } from "../src/sqlite-store.ts";
import { sessionStoreConformance } from "./store-conformance.ts";

const closers: (() => void)[] = [];
afterAll(() => closers.forEach((c) => c()));

sessionStoreConformance("node:sqlite", async () => {
  const { store, close } = openSqliteStore(path.join(mkdtempSync(path.join(tmpdir(), "iii-sessions-")), "nested", "sessions.sqlite"));
  closers.push(close);
  return store;
});
