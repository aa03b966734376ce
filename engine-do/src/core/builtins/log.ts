// engine::log::{info,warn,error,debug,trace}: a worker's log line, written to the engine's log with
// the worker that wrote it. iii-sdk's logger and iii's clients call them; iii's RBAC listener lets
// every connection do so (protocol's RBAC_INFRASTRUCTURE_FUNCTIONS).
import { MAX_LOG_MESSAGE_CHARS } from "@iii-edge/protocol";
import type { EngineApi } from "../api.ts";
import { defineBuiltin } from "./define.ts";

/** iii's five levels. The log port has two streams: warn and error go to its warn, the rest to info. */
const LEVELS = ["info", "warn", "error", "debug", "trace"] as const;

export function installLog(core: EngineApi): void {
  for (const level of LEVELS) {
    defineBuiltin(core, `engine::log::${level}`, {
      description: `Write a ${level} line to the engine's log`,
      internal: true,
      handler: (input, ctx) => {
        const fields = { level, worker_id: ctx.callerWorkerId ?? null, message: input.message.slice(0, MAX_LOG_MESSAGE_CHARS) };
        if (level === "warn" || level === "error") core.ports.log.warn("worker log", fields);
        else core.ports.log.info("worker log", fields);
        return null;
      },
    });
  }
}
