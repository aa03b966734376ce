export * from "./frames.ts";
export * from "./errors.ts";
export * from "./builtins.ts";
export * from "./limits.ts";
export { parseWorkerFrame, parseEngineFrame, peekCallIds, type ParseResult } from "./parse.ts";
export * from "./json-depth.ts";
export * from "./auth.ts";
