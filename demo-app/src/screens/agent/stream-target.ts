// Where the tab's stream socket goes: the engine's `/_iii/streams` beside the worker socket the
// shell dialled (same origin, or `/ns/<namespace>`), with the same token when auth is on — a
// browser cannot set headers on a WebSocket, so it travels as the `iii.bearer.<token>` subprotocol,
// as sdk-browser's worker socket does. The shell may say which engine and token with
// `setStreamTarget`; without it the page's own origin, default namespace, and the token the shell
// got the way app/connection.ts does (a `#token=` kept for this tab, else `GET /_console/token`).
import { engineUrl, tokenProtocols, type BrowserWorkerOptions } from "@iii-edge/sdk-browser";

export interface StreamTargetConfig {
  /** The engine as the shell dialled it: `/`, `/ns/<ns>`, `ws://host:port/`. */
  engine: string;
  token?: BrowserWorkerOptions["token"];
}

/** Where app/connection.ts keeps a `#token=` token, and the console credential, for this tab. */
const SHELL_TOKEN_KEY = "iii-console-token";
const SHELL_CREDENTIAL_KEY = "iii-console-credential";
const SHELL_CODE_KEY = "iii-console-code";
/** The token route answers from the engine's own Worker at once; past this, dial without one. */
const TOKEN_FETCH_TIMEOUT_MS = 5_000;

async function shellToken(): Promise<string> {
  const kept = typeof sessionStorage !== "undefined" ? sessionStorage.getItem(SHELL_TOKEN_KEY) : null;
  if (kept) return kept;
  try {
    const credential = sessionStorage.getItem(SHELL_CREDENTIAL_KEY);
    const code = sessionStorage.getItem(SHELL_CODE_KEY);
    const headers: Record<string, string> = {};
    if (credential) headers.authorization = `Bearer ${credential}`;
    if (code) headers["x-console-code"] = code;
    const res = await fetch("/_console/token", { cache: "no-store", headers, signal: AbortSignal.timeout(TOKEN_FETCH_TIMEOUT_MS) });
    if (!res.ok) return "";
    const body = (await res.json()) as { token?: string | null };
    return body.token ?? "";
  } catch {
    return "";
  }
}

let config: StreamTargetConfig = { engine: "/", token: shellToken };

export function setStreamTarget(c: StreamTargetConfig): void {
  config = c;
}

export function streamTargetConfig(): StreamTargetConfig {
  return config;
}

/** The socket URL and subprotocols to open a stream socket with now (a token function is asked
 * each time, so a short-lived token is fresh on every reconnect). */
export async function streamTarget(): Promise<{ url: string; protocols: string[] }> {
  const base = new URL(engineUrl(config.engine));
  base.pathname = `${base.pathname.replace(/\/+$/, "")}/_iii/streams`;
  base.search = "";
  base.hash = "";
  return { url: base.toString(), protocols: await tokenProtocols(config.token) };
}
