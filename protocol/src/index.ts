export * from "./frames.ts";
export * from "./errors.ts";
export * from "./builtins.ts";
export * from "./limits.ts";
export { parseWorkerFrame, parseEngineFrame, type ParseResult } from "./parse.ts";
export * from "./auth.ts";
