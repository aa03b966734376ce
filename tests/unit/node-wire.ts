// The raw wire client of the workerd suites (tests/workers/wire-core.ts) dialling the engine core
// served in this process, so a suite of wire cases runs on both engines. `useNodeEngine()` starts
// one engine for the file (beforeAll) and points every Wire at it; a `grant` reaches the engine as
// the front door would hand it over (the `x-iii-grant` header node-engine honours).
import { afterAll, beforeAll } from "vitest";
import { startNodeEngine, type NodeEngine } from "@iii-edge/test-support/node-engine";
import { Wire } from "../workers/wire-core.ts";

export * from "../workers/wire-core.ts";

export function useNodeEngine(opts: Parameters<typeof startNodeEngine>[0] = {}): { engine(): NodeEngine } {
  let engine: NodeEngine | undefined;
  beforeAll(async () => {
    engine = await startNodeEngine(opts);
    Wire.opener = (path, grant) =>
      new Promise<WebSocket>((resolve, reject) => {
        const headers = grant ? { "x-iii-grant": JSON.stringify(grant) } : {};
        // Node's WebSocket (undici) takes headers in its second argument.
        const ws = new WebSocket(`${engine!.wsUrl}${path}`, { headers } as unknown as string[]);
        ws.binaryType = "arraybuffer";
        ws.addEventListener("open", () => resolve(ws), { once: true });
        ws.addEventListener("error", () => reject(new Error(`could not open ${path}`)), { once: true });
      });
  });
  afterAll(async () => {
    await engine?.stop();
  });
  return {
    engine: () => {
      if (!engine) throw new Error("the engine starts in beforeAll");
      return engine;
    },
  };
}
