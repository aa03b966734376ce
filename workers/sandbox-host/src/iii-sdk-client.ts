// Stand-in for sdk-edge's Node client, built on npm iii-sdk until sdk-edge lands (see
// engine-client.ts). iii-sdk reconnects and re-registers functions by itself. It cannot send
// custom worker metadata, so the metadata is folded into the worker description instead; the
// full picture is also served by `sandbox::info`.
import { registerWorker as iiiRegisterWorker } from "iii-sdk";
import type { EngineClient, WorkerOptions } from "./engine-client.ts";

/** iii sanitises worker descriptions to 280 characters. */
const MAX_DESCRIPTION = 280;

export function registerWorker(url: string, options: WorkerOptions = {}): EngineClient {
  const description = options.metadata ? `sandbox host ${JSON.stringify(options.metadata)}`.slice(0, MAX_DESCRIPTION) : undefined;
  const iii = iiiRegisterWorker(url, {
    workerName: options.workerName,
    workerDescription: description,
    enableMetricsReporting: false,
    otel: { enabled: false },
  });
  return {
    registerFunction(reg, handler) {
      const { id, ...rest } = reg;
      return iii.registerFunction(id, handler, rest as Parameters<typeof iii.registerFunction>[2]);
    },
    trigger(req) {
      return iii.trigger(req);
    },
    shutdown() {
      return iii.shutdown();
    },
  };
}
