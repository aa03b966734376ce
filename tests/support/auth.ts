// Tokens for suites that run the engine with auth on: one AUTH_SECRET for the run, and a minting
// helper over the same code `npm run token` uses.
import { mintToken } from "@iii-edge/protocol/token";
import type { Grant } from "@iii-edge/protocol";
import { startEngine, type EngineServer } from "./engine-server.ts";

export const TEST_AUTH_SECRET = "test-secret-0123456789abcdef0123456789abcdef";

/** A token for `sub` (default: every namespace, no restriction beyond ownership). */
export function token(sub: string, grant: Partial<Omit<Grant, "sub" | "exp">> = {}, ttlSeconds = 3600): Promise<string> {
  return mintToken(TEST_AUTH_SECRET, { ns: ["*"], ...grant, sub }, ttlSeconds);
}

export const bearer = (t: string) => ({ Authorization: `Bearer ${t}` });

/** `npm start` with AUTH_SECRET in its environment (extra Worker vars optional). */
export function startSecureEngine(vars?: Record<string, string>): Promise<EngineServer> {
  return startEngine({ env: { AUTH_SECRET: TEST_AUTH_SECRET }, vars });
}
