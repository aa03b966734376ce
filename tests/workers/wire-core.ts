// A raw iii wire client: one WebSocket to the engine, every frame it receives kept in order, and
// small helpers to wait for, call and serve. It speaks the frames of protocol/README.md §3 by hand,
// so the tests see exactly what the engine sends. How the socket is opened is the runtime's part:
// wire.ts (workerd, through the engine Worker) or tests/unit/node-wire.ts (the engine core served
// in-process), so a suite of cases can run on both.

// Frames are read as loose JSON objects: the tests assert on their fields.
// biome-ignore lint/suspicious/noExplicitAny: frames as read off the wire by tests, each field checked by an expect
export type Frame = Record<string, any>;

/** Default wait for a frame that should arrive: generous for a shared 2-core CI box. */
const WAIT_MS = 3_000;

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
export const uuid = () => crypto.randomUUID();

type Handler = (data: Frame["data"], frame: Frame) => unknown;
/** Returned by a serve() handler: do not answer this invocation. */
export const NO_REPLY = Symbol("no-reply");

interface Waiter {
  pred: (f: Frame) => boolean;
  resolve: (f: Frame) => void;
}

export class Wire {
  readonly ws: WebSocket;
  /** Every frame received, in order (non-JSON ones as `{raw}`). */
  readonly frames: Frame[] = [];
  private readonly consumed = new Set<Frame>();
  private waiters: Waiter[] = [];
  private readonly handlers = new Map<string, Handler>();
  closed: { code: number; reason: string } | null = null;
  private closeWaiters: (() => void)[] = [];

  private constructor(ws: WebSocket) {
    this.ws = ws;
    ws.addEventListener("message", (ev) => {
      const text = typeof ev.data === "string" ? ev.data : new TextDecoder().decode(ev.data as ArrayBuffer);
      let f: Frame;
      try {
        f = JSON.parse(text) as Frame;
      } catch {
        f = { raw: text };
      }
      this.frames.push(f);
      if (f.type === "invokefunction" && this.handlers.has(f.function_id)) {
        // Without an invocation id nobody waits for the result: run it and send nothing, as
        // iii-sdk does (the engine's discovery fires).
        if (f.invocation_id === undefined) void this.runOnly(f);
        else void this.answer(f);
      }
      for (const w of [...this.waiters]) {
        if (!this.consumed.has(f) && w.pred(f)) {
          this.consumed.add(f);
          this.waiters = this.waiters.filter((x) => x !== w);
          w.resolve(f);
        }
      }
    });
    ws.addEventListener("close", (ev) => {
      this.closed = { code: ev.code, reason: ev.reason };
      for (const r of this.closeWaiters) r();
    });
  }

  /**
   * How a socket is opened: the workerd suites (wire.ts) go through the engine Worker's front door,
   * the unit suites dial the engine core served in-process (tests/unit/node-wire.ts). With `grant`,
   * the socket reaches the engine with that grant, as the front door hands it over once a token is
   * verified (these suites run the engine open).
   */
  static opener: (path: string, grant?: Record<string, unknown>) => Promise<WebSocket> = () => {
    throw new Error("no Wire.opener: import wire.ts (workerd) or node-wire.ts (the in-process core)");
  };

  /** Open a control socket on `path` (default namespace `/`, or `/ns/<name>`). */
  static async open(path = "/", grant?: Record<string, unknown>): Promise<Wire> {
    return new Wire(await Wire.opener(path, grant));
  }

  /** Open and wait for `workerregistered`; returns the client and its identity. */
  static async connect(path = "/", grant?: Record<string, unknown>): Promise<Connected> {
    const w = await Wire.open(path, grant);
    const reg = await w.next((f) => f.type === "workerregistered");
    return Object.assign(w, { workerId: reg.worker_id as string, token: reg.reattach_token as string });
  }

  send(frame: Frame | string | ArrayBuffer): void {
    this.ws.send(typeof frame === "string" || frame instanceof ArrayBuffer ? frame : JSON.stringify(frame));
  }

  /** The next not-yet-consumed frame matching `pred` (already received or still to come). */
  next(pred: (f: Frame) => boolean, timeoutMs = WAIT_MS, what = "frame"): Promise<Frame> {
    for (const f of this.frames) {
      if (!this.consumed.has(f) && pred(f)) {
        this.consumed.add(f);
        return Promise.resolve(f);
      }
    }
    return new Promise<Frame>((resolve, reject) => {
      const w: Waiter = {
        pred,
        resolve: (f) => {
          clearTimeout(timer);
          resolve(f);
        },
      };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((x) => x !== w);
        reject(new Error(`no ${what} within ${timeoutMs} ms; received: ${JSON.stringify(this.frames.slice(-8))}`));
      }, timeoutMs);
      this.waiters.push(w);
    });
  }

  /** Resolves with the frame if one matching `pred` arrives within `ms`, else null. */
  async maybe(pred: (f: Frame) => boolean, ms: number): Promise<Frame | null> {
    try {
      return await this.next(pred, ms);
    } catch {
      return null;
    }
  }

  /** Frames of a type received so far (consumed or not). */
  all(type: string): Frame[] {
    return this.frames.filter((f) => f.type === type);
  }

  /** A synchronous call: invokefunction with a fresh id, resolves with its invocationresult. */
  async call(function_id: string, data: unknown = {}, extra: Frame = {}, timeoutMs = WAIT_MS): Promise<Frame> {
    const invocation_id = (extra.invocation_id as string | undefined) ?? uuid();
    this.send({ type: "invokefunction", invocation_id, function_id, data, ...extra });
    return this.next(
      (f) => f.type === "invocationresult" && f.invocation_id === invocation_id,
      timeoutMs,
      `invocationresult for ${function_id}`,
    );
  }

  /** Call and unwrap: throws on an error result. */
  async ok(function_id: string, data: unknown = {}, extra: Frame = {}): Promise<unknown> {
    const r = await this.call(function_id, data, extra);
    if (r.error) throw new Error(`${function_id} failed: ${JSON.stringify(r.error)}`);
    return r.result;
  }

  /** Register a function on this connection and answer its invocations with `handler`. */
  serve(id: string, handler: Handler, extra: Frame = {}): void {
    this.handlers.set(id, handler);
    this.send({ type: "registerfunction", id, ...extra });
  }

  /** Bind `function_id` to `trigger_type` (a `registertrigger` frame; a success gets no answer). */
  registerTrigger(id: string, trigger_type: string, function_id: string, config?: unknown, extra: Frame = {}): void {
    this.send({ type: "registertrigger", id, trigger_type, function_id, ...(config === undefined ? {} : { config }), ...extra });
  }

  /** Answer invocations of `id` locally without (re-)registering it. */
  handle(id: string, handler: Handler): void {
    this.handlers.set(id, handler);
  }

  private async runOnly(f: Frame): Promise<void> {
    try {
      await this.handlers.get(f.function_id)!(f.data, f);
    } catch {
      // nobody to tell
    }
  }

  private async answer(f: Frame): Promise<void> {
    const handler = this.handlers.get(f.function_id)!;
    try {
      const result = await handler(f.data, f);
      if (result === NO_REPLY) return;
      const out: Frame = { type: "invocationresult", invocation_id: f.invocation_id, function_id: f.function_id };
      if (result !== undefined) out.result = result;
      this.send(out);
    } catch (e) {
      this.send({
        type: "invocationresult",
        invocation_id: f.invocation_id,
        function_id: f.function_id,
        error: { code: "invocation_failed", message: String((e as Error).message ?? e) },
      });
    }
  }

  close(code = 1000): Promise<void> {
    if (this.closed) return Promise.resolve();
    const done = new Promise<void>((r) => this.closeWaiters.push(r));
    try {
      this.ws.close(code, "test done");
    } catch {
      return Promise.resolve();
    }
    return Promise.race([done, sleep(500)]);
  }

  waitClosed(ms = WAIT_MS): Promise<boolean> {
    if (this.closed) return Promise.resolve(true);
    return Promise.race([new Promise<boolean>((r) => this.closeWaiters.push(() => r(true))), sleep(ms).then(() => false)]);
  }
}

/** A Wire that has received its identity. */
export type Connected = Wire & { workerId: string; token: string };

/** Closes every Wire opened through it; call `closeAll()` in afterEach. */
export class Wires {
  private readonly open: Wire[] = [];
  async connect(path = "/", grant?: Record<string, unknown>) {
    const w = await Wire.connect(path, grant);
    this.open.push(w);
    return w;
  }
  async raw(path = "/") {
    const w = await Wire.open(path);
    this.open.push(w);
    return w;
  }
  async closeAll(): Promise<void> {
    await Promise.all(this.open.splice(0).map((w) => w.close()));
    // Let the engine run the cleanups before the next test looks at the catalog.
    await sleep(20);
  }
}

/** Function ids the engine currently lists (include_internal), through a fresh socket's view. */
export async function functionIds(w: Wire): Promise<string[]> {
  const r = (await w.ok("engine::functions::list", { include_internal: true })) as { functions: { function_id: string }[] };
  return r.functions.map((f) => f.function_id);
}

/** Poll `fn` until it returns a truthy value or the deadline passes. */
export async function eventually<T>(fn: () => Promise<T> | T, ms = WAIT_MS, step = 20): Promise<T> {
  const deadline = Date.now() + ms;
  let last: T = await fn();
  while (!last && Date.now() < deadline) {
    await sleep(step);
    last = await fn();
  }
  return last;
}
