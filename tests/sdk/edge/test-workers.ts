// Worker modules (sdk-edge/src/worker.ts) for tests/sdk/worker-edge.e2e.test.ts, hosted in a Worker by
// `WorkerHost` exactly as deploy/harness.ts hosts the built-in ones. `TEST_DISABLE` leaves some out.
import type { WorkerModule, WorkerSurface } from "@iii-edge/sdk-edge/worker";
import { WorkerHost } from "@iii-edge/sdk-edge/worker-edge";
import { z } from "zod";
import type { StreamChannelRef } from "@iii-edge/protocol";

/** The settings `npm start` passes through its env file, read back by the tests. */
const PASSED = [
  "OPENAI_API_KEY",
  "OPENAI_BASE_URL",
  "ANTHROPIC_API_KEY",
  "ANTHROPIC_BASE_URL",
  "CREDENTIALS_KEY",
  "III_PERMISSIONS",
  "HARNESS_DISABLE",
];

const text = (item: string | Uint8Array) => (typeof item === "string" ? item : `bytes:${[...item].join(",")}`);

async function drain(iii: WorkerSurface, ref: StreamChannelRef): Promise<string[]> {
  const out: string[] = [];
  for await (const item of iii.channels.read(ref)) out.push(text(item));
  return out;
}

/** How often `register` ran in this isolate: once, however many calls and namespaces it serves. */
let registrations = 0;

const probe: WorkerModule<{ hasDb: boolean }> = {
  name: "probe",
  configFrom: (env) => ({ hasDb: typeof env.DB === "object" && env.DB !== null }),
  register(iii, config) {
    registrations++;
    iii.registerFunction("wtest::registrations", () => ({ registrations }));
    iii.registerFunction("wtest::env", () => ({
      runtime: iii.runtime,
      passed: Object.fromEntries(PASSED.map((k) => [k, iii.env[k] ?? null])),
      config,
      envHasDb: "DB" in iii.env,
    }));
    iii.registerFunction("wtest::greet", ({ name }: { name: string }) => ({ text: `hi ${name}` }), {
      description: "zod-typed through the surface",
      input: z.object({ name: z.string().min(1) }),
    });
    // `iii.trigger` (not ctx.trigger): still the namespace of the invocation being handled.
    iii.registerFunction("wtest::put", async ({ key, value }: { key: string; value: unknown }) => {
      await iii.trigger({ function_id: "state::set", payload: { scope: "wtest", key, value } });
      return { ok: true };
    });
  },
};

const streams: WorkerModule = {
  name: "streams",
  register(iii) {
    // Like a provider: write into a channel someone else reads, then close.
    iii.registerFunction("wtest::write", async ({ writer_ref, items }: { writer_ref: StreamChannelRef; items: string[] }) => {
      const w = await iii.channels.openWriter(writer_ref);
      for (const item of items) w.write(item);
      w.write(new Uint8Array([1, 2, 3]));
      w.close();
      return { written: items.length + 1 };
    });
    // Read a channel someone else writes, to its end.
    iii.registerFunction("wtest::read", async ({ reader_ref }: { reader_ref: StreamChannelRef }) => ({
      items: await drain(iii, reader_ref),
    }));
    // Both ends in this Worker: create, write, read back, and the writer's close as the engine saw it.
    iii.registerFunction("wtest::loopback", async ({ items }: { items: string[] }) => {
      const { writer, reader } = await iii.channels.create();
      const w = await iii.channels.openWriter(writer);
      const read = drain(iii, reader);
      for (const item of items) w.write(item);
      w.close();
      const closed = await w.closed;
      let afterClose: string | null = null;
      try {
        w.write("late");
      } catch (e) {
        afterClose = (e as { code?: string }).code ?? "thrown";
      }
      return { items: await read, closed, afterClose };
    });
    iii.registerFunction("wtest::attach-bad", async ({ ref }: { ref: StreamChannelRef }) => {
      try {
        await iii.channels.openWriter(ref);
        return { error: null };
      } catch (e) {
        return { error: (e as { code?: string }).code ?? String(e) };
      }
    });
  },
};

const ticks: WorkerModule = {
  name: "ticks",
  register(iii) {
    iii.registerFunction("wtest::on-tick", (data: { tick: number }, ctx) => ({
      got: data,
      function_id: ctx.function_id,
      runtime: iii.runtime,
    }));
    // A trigger type no engine has: a socket worker provides it (the engine parks the binding until then).
    iii.registerTrigger({ type: "wtest::ticks", function_id: "wtest::on-tick", config: { label: "from-the-edge" } });
  },
};

const skipped: WorkerModule = {
  name: "skipped",
  register(iii) {
    iii.registerFunction("wtest::skipped", () => "should not be registered");
  },
};

interface TestEnv {
  ENGINE: DurableObjectNamespace;
  TEST_DISABLE?: string;
}

export class TestWorkers extends WorkerHost<TestEnv> {
  protected readonly workers: readonly WorkerModule<unknown>[] = [probe, streams, ticks, skipped];
  protected override readonly disableVar = "TEST_DISABLE";
}
