// Types of common.mjs for the TypeScript benches.
export interface Sink {
  port: number;
  url: string;
  /** The workerd that runs the sink's Worker (undefined if it could not be found in /proc). */
  runtime: number | undefined;
  stop(): Promise<void>;
}
export function startSink(opts?: { obs?: boolean }): Promise<Sink>;
export function runtimeOf(group: number, port: number): number | undefined;
export function freePort(): Promise<number>;
export function sleep(ms: number): Promise<void>;
export function usage(pid: number): { pgid: number; cpu: number; rss: number };
export function until(url: string, ms?: number): Promise<void>;
