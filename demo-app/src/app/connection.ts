// This tab's link to the engine: where its token comes from, the worker it registers as, and the
// connection status every screen shows (ConnectionStatus, types.ts).
//
// Token, in order (demo-app/README.md "Auth"):
//   1. `#token=<t>` in the URL the page was opened with (a token minted by `npm run token`); read
//      once, kept for this tab only (sessionStorage), the fragment is removed from the address bar.
//   2. `GET /_console/token` on the engine's own Worker (demo-app/edge/console-token.ts): a short-
//      lived, narrow grant for a console user — on an open engine it answers `{token: null}`, on
//      loopback `npm start` with AUTH_SECRET it mints one for the console code the URL `npm start`
//      printed carries (`#code=…`: read once, kept for this tab only, sent as X-Console-Code),
//      deployed it wants the console credential (a person types it once: the sign-in banner; it is
//      kept for this tab only).
// The SDK asks for the token again on every reconnect, so an expired one is replaced.
import { registerWorker, type BrowserClient, type ConnectionState } from "@iii-edge/sdk-browser";
import type { ConnectionStatus } from "./types.ts";

/** A token is fetched again this long before it expires (a reconnect must not present an expired one). */
const TOKEN_REFRESH_MARGIN_MS = 30_000;
/** While not connected, the page asks the engine over HTTP why (unreachable? token refused?) this often. */
const PROBE_EVERY_MS = 2_000;
/** A first connect that has not opened after this long is probed (it may be a refused token). */
const PROBE_AFTER_MS = 1_500;
/** How fast a dropped tab retries (the SDK backs off from here up to its 30 s cap). */
const RECONNECT_INITIAL_DELAY_MS = 500;
/** Longest wait between retries: a console should come back soon after the engine does. */
const RECONNECT_MAX_DELAY_MS = 5_000;

const CREDENTIAL_KEY = "iii-console-credential";
const TOKEN_KEY = "iii-console-token";
const CODE_KEY = "iii-console-code";
/** The header the token route reads the console code from (console-token.ts CONSOLE_CODE_HEADER). */
const CODE_HEADER = "x-console-code";

export interface ConnectionSnapshot {
  status: ConnectionStatus;
  /** The SDK's own state (connecting, connected, reconnecting, disconnected, failed). */
  sdkState: ConnectionState;
  /** Why, for refused / unreachable. */
  message?: string;
  /** When the link was last lost (undefined while open). */
  lostAt?: Date;
  /** When the link last opened: data fetched before this is stale until fetched again. */
  openedAt: number;
  /** The token route wants the console credential (deployed, AUTH_SECRET set). */
  needsCredential: boolean;
  workerId?: string;
}

type Listener = (s: ConnectionSnapshot) => void;

interface TokenAnswer {
  token: string | null;
  expires_at?: number;
  sub?: string;
}

export class ConsoleConnection {
  readonly iii: BrowserClient;
  readonly workerName: string;
  private snap: ConnectionSnapshot = { status: "connecting", sdkState: "connecting", openedAt: 0, needsCredential: false };
  private readonly listeners = new Set<Listener>();
  private fragmentToken: string | undefined;
  private cached: { token: string; expiresAt: number } | undefined;
  private tokenProblem: { status: number; message: string } | undefined;
  /** What the person's last sign-in was told (a wrong credential). A probe running beside the
   * sign-in asks the token route without a credential and would replace it with the generic
   * "sign in" prompt within seconds, so the person never reads why their attempt failed. */
  private signInRefusal: string | undefined;
  private probeTimer: ReturnType<typeof setInterval> | undefined;

  constructor() {
    const tabId = Math.random().toString(36).slice(2, 8);
    this.workerName = `console-${tabId}`;
    this.fragmentToken = takeFragmentToken();
    takeFragmentCode();
    this.iii = registerWorker("/", {
      workerName: this.workerName,
      metadata: { page: "console" },
      token: () => this.token(),
      reconnectionConfig: { initialDelayMs: RECONNECT_INITIAL_DELAY_MS, maxDelayMs: RECONNECT_MAX_DELAY_MS },
    });
    this.iii.addConnectionStateListener((state) => this.onState(state));
    this.startProbing(PROBE_AFTER_MS);
  }

  get snapshot(): ConnectionSnapshot {
    return this.snap;
  }

  subscribe(fn: Listener): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** Requests to the engine's own API (`/_iii/*`), with this tab's token as a Bearer header. A
   * string body is JSON: the engine refuses a browser's text/plain body (a forged request's). */
  async fetch(path: string, init: RequestInit = {}): Promise<Response> {
    const headers = new Headers(init.headers);
    const t = await this.token();
    if (t && !headers.has("authorization")) headers.set("authorization", `Bearer ${t}`);
    if (typeof init.body === "string" && !headers.has("content-type")) headers.set("content-type", "application/json");
    return fetch(path, { ...init, headers });
  }

  /** The person typed the console credential (sign-in banner): keep it for this tab, reconnect. */
  async signIn(credential: string): Promise<void> {
    sessionStorage.setItem(CREDENTIAL_KEY, credential);
    this.cached = undefined;
    this.tokenProblem = undefined;
    this.signInRefusal = undefined;
    await this.token();
    const problem = this.tokenProblem as { status: number; message: string } | undefined;
    if (problem) {
      sessionStorage.removeItem(CREDENTIAL_KEY);
      this.signInRefusal = problem.message;
      this.set({ status: "refused", message: problem.message, needsCredential: true });
      return;
    }
    // The token route answers now: dial at once rather than at the SDK's next retry.
    this.iii.reconnect();
  }

  /** Whether the token came in the page's URL (`#token=`), not from the token route. */
  get usesGivenToken(): boolean {
    return this.fragmentToken !== undefined;
  }

  /** Drop a `#token=` token (refused, expired) and reload: the page asks the token route instead. */
  forgetGivenToken(): void {
    sessionStorage.removeItem(TOKEN_KEY);
    location.reload();
  }

  /** The token to present now ("" = none). Never throws: a failure is remembered for the probe. */
  private async token(): Promise<string> {
    if (this.fragmentToken) return this.fragmentToken;
    if (this.cached && this.cached.expiresAt - TOKEN_REFRESH_MARGIN_MS > Date.now()) return this.cached.token;
    try {
      const headers: Record<string, string> = {};
      const credential = sessionStorage.getItem(CREDENTIAL_KEY);
      if (credential) headers.authorization = `Bearer ${credential}`;
      const code = sessionStorage.getItem(CODE_KEY);
      if (code) headers[CODE_HEADER] = code;
      const res = await fetch("/_console/token", { headers, cache: "no-store" });
      if (res.status === 404) {
        this.tokenProblem = undefined;
        return ""; // no token route (an engine without the console Worker): connect without one
      }
      const body = (await res.json().catch(() => ({}))) as Partial<TokenAnswer> & { error?: { message?: string } };
      if (!res.ok) {
        this.tokenProblem = { status: res.status, message: body.error?.message ?? `the console token route answered ${res.status}` };
        return "";
      }
      this.tokenProblem = undefined;
      if (!body.token) return "";
      this.cached = { token: body.token, expiresAt: (body.expires_at ?? 0) * 1000 };
      return body.token;
    } catch {
      return this.cached?.token ?? ""; // unreachable: the probe tells the person
    }
  }

  private onState(state: ConnectionState): void {
    if (state === "connected") {
      this.stopProbing();
      this.signInRefusal = undefined;
      this.set({
        status: "open",
        sdkState: state,
        message: undefined,
        lostAt: undefined,
        openedAt: Date.now(),
        needsCredential: false,
        workerId: this.iii.workerId,
      });
      return;
    }
    const lostAt = this.snap.lostAt ?? (this.snap.status === "open" || this.snap.openedAt ? new Date() : undefined);
    if (state === "failed") {
      this.stopProbing();
      this.set({
        status: "unreachable",
        sdkState: state,
        lostAt: lostAt ?? new Date(),
        message: this.iii.connectionError?.message ?? "the connection gave up",
      });
      return;
    }
    const status: ConnectionStatus =
      this.snap.status === "refused" || this.snap.status === "unreachable"
        ? this.snap.status
        : state === "connecting"
          ? "connecting"
          : "reconnecting";
    this.set({ status, sdkState: state, lostAt });
    this.startProbing(0);
  }

  private startProbing(delay: number): void {
    if (this.probeTimer) return;
    const run = () => void this.probe();
    this.probeTimer = setInterval(run, PROBE_EVERY_MS);
    setTimeout(run, delay);
  }

  private stopProbing(): void {
    clearInterval(this.probeTimer);
    this.probeTimer = undefined;
  }

  /** Not connected: find out why, over plain HTTP (a browser cannot read a refused upgrade). */
  private async probe(): Promise<void> {
    if (this.iii.getConnectionState() === "connected") return;
    const keep = this.snap.sdkState === "connecting" ? "connecting" : "reconnecting";
    try {
      const health = await fetch("/healthz", { cache: "no-store" });
      if (!health.ok) throw new Error(`/healthz answered ${health.status}`);
    } catch (e) {
      this.set({
        status: "unreachable",
        message: `the engine at ${location.host} does not answer (${e instanceof Error ? e.message : String(e)}); retrying`,
      });
      return;
    }
    await this.token();
    if (this.tokenProblem) {
      const needsCredential = this.tokenProblem.status === 401 && !this.fragmentToken;
      this.set({
        status: "refused",
        message: (needsCredential ? this.signInRefusal : undefined) ?? this.tokenProblem.message,
        needsCredential,
      });
      return;
    }
    try {
      const res = await this.fetch("/_iii/invoke", {
        method: "POST",
        body: JSON.stringify({ function_id: "engine::workers::list", payload: { limit: 1 } }),
      });
      if (res.status === 401 || res.status === 403) {
        const body = (await res.json().catch(() => ({}))) as { error?: { message?: string } };
        this.set({ status: "refused", message: `the engine refused this console's token: ${body.error?.message ?? res.status}` });
        return;
      }
    } catch {
      // a race with the engine going away: the next probe says so
    }
    if (this.iii.getConnectionState() !== "connected") this.set({ status: keep, message: undefined });
  }

  private set(patch: Partial<ConnectionSnapshot>): void {
    if (this.iii.getConnectionState() === "connected" && patch.status && patch.status !== "open") return; // a late probe
    this.snap = { ...this.snap, ...patch };
    for (const l of this.listeners) l(this.snap);
  }
}

/** `#token=…` (or `#/screen?…&token=…`): take it out of the address bar, keep it for this tab. */
function takeFragmentToken(): string | undefined {
  const hash = location.hash.slice(1);
  const query = hash.includes("?") ? hash.slice(hash.indexOf("?") + 1) : hash.startsWith("/") ? "" : hash;
  const params = new URLSearchParams(query);
  const t = params.get("token");
  if (t) {
    sessionStorage.setItem(TOKEN_KEY, t);
    params.delete("token");
    const route = hash.startsWith("/") ? hash.split("?")[0] : "/";
    const rest = params.toString();
    history.replaceState(null, "", `${location.pathname}${location.search}#${route}${rest ? `?${rest}` : ""}`);
    return t;
  }
  return sessionStorage.getItem(TOKEN_KEY) ?? undefined;
}

/** `#code=…` (or `#/screen?…&code=…`), the console code in the URL `npm start` printed: taken out
 * of the address bar, kept for this tab (the token route asks for it on every refresh). */
function takeFragmentCode(): void {
  const hash = location.hash.slice(1);
  const query = hash.includes("?") ? hash.slice(hash.indexOf("?") + 1) : hash.startsWith("/") ? "" : hash;
  const params = new URLSearchParams(query);
  const code = params.get("code");
  if (!code) return;
  sessionStorage.setItem(CODE_KEY, code);
  params.delete("code");
  const route = hash.startsWith("/") ? hash.split("?")[0] : "/";
  const rest = params.toString();
  history.replaceState(null, "", `${location.pathname}${location.search}#${route}${rest ? `?${rest}` : ""}`);
}
