// A worker that takes a stream over with iii-sdk's `createStream` (protocol/README.md §7.3): its
// items live in a Map in this process, not in the engine; every operation it serves is recorded,
// and a stream trigger bound by the same worker records what fired. Shared by the suites that run
// it on the engine core (tests/unit/custom-streams.test.ts) and under `npm start`
// (tests/triggers-e2e/custom-streams.test.ts: the stream socket's pushes).
import { registerWorker, type IIIClient } from "iii-sdk";
import { createStream } from "iii-sdk/helpers";
import { afterAll, beforeAll } from "vitest";
import { eventually } from "@iii-edge/test-support/wait";

export interface Card {
  title: string;
  n?: number;
}

export interface OwnedStream {
  /** The owning worker's items by `group/item`. */
  items: Map<string, Card>;
  /** Every operation the owner served, with the input it was given. */
  calls: { op: string; input: Record<string, unknown> }[];
  /** What the owner's stream trigger received. */
  fired: { event: { type: string; data?: unknown }; id: string | null }[];
}

/** Function ids the engine lists right now, internal ones included. */
export async function functionIds(w: IIIClient): Promise<string[]> {
  const out = (await w.trigger({ function_id: "engine::functions::list", payload: { include_internal: true } })) as {
    functions: { function_id: string }[];
  };
  return out.functions.map((f) => f.function_id);
}

/** `owner` takes `stream` over (all six operations) and binds a stream trigger to it. Registrations
 * are fire-and-forget: wait for `stream::update(<stream>)` in the catalog before using it. */
export function ownStream(owner: IIIClient, stream: string): OwnedStream {
  const items = new Map<string, Card>();
  const calls: OwnedStream["calls"] = [];
  const fired: OwnedStream["fired"] = [];
  const key = (i: { group_id: string; item_id: string }) => `${i.group_id}/${i.item_id}`;
  createStream<Card>(owner, stream, {
    get: async (input) => {
      calls.push({ op: "get", input: { ...input } });
      return items.get(key(input)) ?? null;
    },
    set: async (input) => {
      calls.push({ op: "set", input: { ...input } });
      const old = items.get(key(input));
      items.set(key(input), input.data as Card);
      return { old_value: old, new_value: input.data as Card };
    },
    delete: async (input) => {
      calls.push({ op: "delete", input: { ...input } });
      const old = items.get(key(input));
      items.delete(key(input));
      return { old_value: old };
    },
    list: async (input) => [...items].filter(([k]) => k.startsWith(`${input.group_id}/`)).map(([, v]) => v),
    listGroups: async () => [...new Set([...items.keys()].map((k) => k.split("/")[0]!))].sort(),
    update: async () => {
      throw new Error("not used: iii-sdk's createStream registers no update");
    },
  });
  // iii-sdk's createStream registers five operations; `update` can be taken over by hand (as iii allows).
  owner.registerFunction(
    `stream::update(${stream})`,
    async (input: { group_id: string; item_id: string; ops: { type: string; path: string; value: unknown }[] }) => {
      calls.push({ op: "update", input: { ...input } });
      const old = items.get(key(input));
      const next: Card = { ...(old ?? { title: "" }) };
      for (const op of input.ops) if (op.type === "set" && op.path === "title") next.title = String(op.value);
      items.set(key(input), next);
      return { old_value: old, new_value: next };
    },
  );
  owner.registerFunction("custom-streams::on-change", async (p: { event: { type: string; data?: unknown }; id: string | null }) => {
    fired.push(p);
  });
  owner.registerTrigger({ type: "stream", function_id: "custom-streams::on-change", config: { stream_name: stream } });
  return { items, calls, fired };
}

/** A suite's engine with an owner worker holding `stream` and a plain `user` worker, both iii-sdk. */
export interface OwnedStreamSuite<E> extends OwnedStream {
  engine: E;
  /** The worker that owns the custom stream (its items live in a Map, not in the engine). */
  owner: IIIClient;
  /** Another worker, a plain user of stream::*. */
  user: IIIClient;
  stream: string;
}

/** Registers the suite's beforeAll/afterAll: `start` an engine, take a fresh stream over with the
 * owner, and wait until its operations are listed. The fields fill in once beforeAll has run. */
export function ownedStreamSuite<E extends { wsUrl: string; stop(): Promise<void> }>(start: () => Promise<E>): OwnedStreamSuite<E> {
  const suite = { stream: `ledger-${Date.now()}` } as OwnedStreamSuite<E>;
  beforeAll(async () => {
    suite.engine = await start();
    const sdk = (name: string) =>
      registerWorker(suite.engine.wsUrl, { workerName: name, otel: { enabled: false }, enableMetricsReporting: false });
    suite.owner = sdk("custom-stream-owner");
    suite.user = sdk("custom-stream-user");
    Object.assign(suite, ownStream(suite.owner, suite.stream));
    await eventually(
      async () => (await functionIds(suite.user)).includes(`stream::update(${suite.stream})`),
      15_000,
      "custom stream operations registered",
    );
  });
  afterAll(async () => {
    await suite.owner?.shutdown();
    await suite.user?.shutdown();
    await suite.engine?.stop();
  });
  return suite;
}
