// Types of bench-engine.mjs for the TypeScript benches.
import type { ChildProcess } from "node:child_process";

export interface BenchEngine {
  port: number;
  url: string;
  wsUrl: string;
  /** wrangler's inspector proxy (Chrome DevTools Protocol). */
  inspectorPort: number;
  persist: string;
  child: ChildProcess;
  log(): string;
  stop(): Promise<void>;
}
export function freePort(): Promise<number>;
export function startBenchEngine(opts?: { port?: number; secretVars?: Record<string, string>; persist?: string }): Promise<BenchEngine>;
