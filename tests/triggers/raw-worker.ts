// A minimal iii worker speaking the raw wire protocol over the engine's WebSocket, for workerd
// tests (iii-sdk needs Node). Registers functions and triggers, answers invocations, makes calls.
import { exports } from "cloudflare:workers";

type Handler = (data: unknown, metadata: unknown, invocationId: string) => unknown;
interface Frame {
  type: string;
  [k: string]: unknown;
}

export class RawWorker {
  readonly ns: string;
  readonly frames: Frame[] = [];
  private readonly ws: WebSocket;
  private readonly handlers = new Map<string, Handler>();
  private readonly calls = new Map<string, (f: Frame) => void>();
  private n = 0;

  private constructor(ws: WebSocket, ns: string) {
    this.ws = ws;
    this.ns = ns;
    ws.addEventListener("message", (e) => void this.onFrame(JSON.parse(String(e.data)) as Frame));
  }

  static async connect(ns: string): Promise<RawWorker> {
    const res = await exports.default.fetch(`http://localhost/ns/${ns}`, { headers: { Upgrade: "websocket" } });
    if (res.status !== 101 || !res.webSocket) throw new Error(`upgrade failed: ${res.status}`);
    res.webSocket.accept();
    return new RawWorker(res.webSocket, ns);
  }

  private async onFrame(f: Frame): Promise<void> {
    this.frames.push(f);
    if (f.type === "invocationresult") {
      this.calls.get(String(f.invocation_id))?.(f);
      this.calls.delete(String(f.invocation_id));
      return;
    }
    if (f.type !== "invokefunction") return;
    const h = this.handlers.get(String(f.function_id));
    const reply: Frame = { type: "invocationresult", invocation_id: f.invocation_id, function_id: f.function_id };
    try {
      if (!h) throw Object.assign(new Error(`no handler ${String(f.function_id)}`), { code: "function_not_found" });
      const result = await h(f.data, f.metadata, String(f.invocation_id));
      if (result !== undefined) reply.result = result;
    } catch (e) {
      reply.error = { code: (e as { code?: string }).code ?? "invocation_failed", message: e instanceof Error ? e.message : String(e) };
    }
    try {
      this.ws.send(JSON.stringify(reply));
    } catch {
      // closed meanwhile
    }
  }

  send(frame: Frame): void {
    this.ws.send(JSON.stringify(frame));
  }

  fn(id: string, handler: Handler): void {
    this.handlers.set(id, handler);
    this.send({ type: "registerfunction", id });
  }

  trigger(
    trigger_type: string,
    function_id: string,
    config: unknown,
    id = `t-${trigger_type}-${++this.n}-${crypto.randomUUID().slice(0, 8)}`,
  ): string {
    this.send({ type: "registertrigger", id, trigger_type, function_id, config });
    return id;
  }

  /** Registration errors the engine reported for trigger `id` (none = accepted). */
  registrationErrors(id: string): { code: string; message: string }[] {
    return this.frames
      .filter((f) => f.type === "triggerregistrationresult" && f.id === id && f.error)
      .map((f) => f.error as { code: string; message: string });
  }

  call(function_id: string, data: unknown, action?: unknown): Promise<{ result?: unknown; error?: { code: string; message: string } }> {
    const invocation_id = crypto.randomUUID();
    return new Promise((resolve) => {
      this.calls.set(invocation_id, (f) => resolve({ result: f.result, error: f.error as { code: string; message: string } | undefined }));
      const frame: Frame = { type: "invokefunction", invocation_id, function_id, data };
      if (action) frame.action = action;
      this.send(frame);
    });
  }

  /** A round trip through the engine: every frame sent before it has been processed. */
  async settle(): Promise<void> {
    await this.call("engine::functions::list", {});
  }

  /** Close the socket; resolves once the engine answers the close (it has handled the disconnect).
   * Callers that do not need to know may leave the promise. */
  close(): Promise<void> {
    return new Promise((resolve) => {
      this.ws.addEventListener("close", () => resolve());
      try {
        this.ws.close(1000, "done");
      } catch {
        resolve(); // already closed
      }
    });
  }
}

export { eventually } from "@iii-edge/test-support/wait";
