// Who an MCP request is: decided exactly as the engine's front door decides it for a WebSocket
// upgrade or `/_iii/invoke` (engine-do/src/auth.ts) — a token signed with AUTH_SECRET, else
// AUTH_FUNCTION's answer, else (no auth configured) open for loopback clients of a loopback engine
// and refused otherwise.
import { authenticate, type AuthConfig, type AuthResult } from "@iii-edge/engine-do/auth";
import type { CallOutcome } from "@iii-edge/protocol";

export type AuthEnv = AuthConfig;
export type McpAuth = AuthResult;

/** Decide who `req` is, for `namespace`. `callDefault` calls a function in the default namespace. Never throws. */
export const authenticateMcp = (
  req: Request,
  namespace: string,
  env: AuthEnv,
  callDefault: (functionId: string, payload: unknown, timeoutMs: number) => Promise<CallOutcome>,
): Promise<McpAuth> => authenticate(req, namespace, env, callDefault);
