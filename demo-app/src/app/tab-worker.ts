// What this tab does as a worker, from the moment it loads (whatever screen is open): the
// discovery bindings that keep the catalog live, and the functions that show why a browser is a
// worker — a person confirms (an in-page dialog), a chart drawn from data it is sent, facts only the
// browser knows, a greeting. Every call is logged with its caller (the `_caller_worker_id` the
// engine adds to object payloads). Handlers are untyped so they see that id; their payloads are
// checked against the same JSON Schema they publish (schema-form/schema.ts).
import type { FunctionSummary } from "@iii-edge/protocol";
import { IIIError, type BrowserClient } from "@iii-edge/sdk-browser";
import { validate, type JsonSchema } from "../schema-form/schema.ts";
import { emit, type StateEvent } from "./live.ts";

/** A confirmation nobody answers is declined after this, inside the caller's 30 s default deadline. */
export const CONFIRM_TIMEOUT_MS = 25_000;
/** Calls kept in the log (newest first). */
export const MAX_LOGGED_CALLS = 100;
/** Points a chart takes (an SVG of more is unreadable at phone width). */
export const MAX_CHART_POINTS = 60;

export interface LoggedCall {
  at: number;
  function_id: string;
  caller: string | null;
  payload: unknown;
  outcome: "ok" | "error" | "pending";
  result?: unknown;
  ms?: number;
}

export interface PendingConfirm {
  id: number;
  question: string;
  caller: string | null;
  deadline: number;
  answer(confirmed: boolean): void;
}

export interface ChartData {
  title: string;
  points: { label: string; value: number }[];
  caller: string | null;
  at: number;
}

type Listener = () => void;

export class TabWorker {
  readonly prefix: string;
  calls: LoggedCall[] = [];
  confirm: PendingConfirm | undefined;
  chart: ChartData | undefined;
  private readonly listeners = new Set<Listener>();
  private confirmQueue: PendingConfirm[] = [];
  private nextConfirm = 1;

  private readonly iii: BrowserClient;

  constructor(iii: BrowserClient, workerName: string) {
    this.iii = iii;
    this.prefix = workerName;
    this.bindDiscovery();
    this.registerShowcase();
  }

  fn(name: "greet" | "confirm" | "chart" | "facts"): string {
    return `${this.prefix}::${name}`;
  }

  subscribe(fn: Listener): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private changed(): void {
    for (const l of this.listeners) l();
  }

  private bindDiscovery(): void {
    const onFunctions = `${this.prefix}::on-functions`;
    this.iii.registerFunction(
      onFunctions,
      (data: { functions?: FunctionSummary[] }) => {
        emit("functions", data?.functions ?? []);
        return null;
      },
      { description: "Receives catalog changes (engine::functions-available)", metadata: { internal: true } },
    );
    this.iii.registerTrigger({ type: "engine::functions-available", function_id: onFunctions, config: {} });
    const onWorkers = `${this.prefix}::on-workers`;
    this.iii.registerFunction(
      onWorkers,
      (data: unknown) => {
        emit("workers", data);
        return null;
      },
      { description: "Receives worker changes (engine::workers-available)", metadata: { internal: true } },
    );
    this.iii.registerTrigger({ type: "engine::workers-available", function_id: onWorkers, config: {} });
    // State changes: the function is always there; the binding only while a screen watches
    // (watchState), so the engine queues no fires for a tab that shows no state.
    this.iii.registerFunction(
      this.onStateId,
      (data: StateEvent) => {
        if (data && data.type === "state") emit("state", data);
        return null;
      },
      { description: "Receives state changes (state trigger) for the Queues & state screen", metadata: { internal: true } },
    );
  }

  private get onStateId(): string {
    return `${this.prefix}::on-state`;
  }

  /** Bind this tab to every state change until the returned function is called. */
  watchState(): () => void {
    const t = this.iii.registerTrigger({ type: "state", function_id: this.onStateId, config: {} });
    return () => t.unregister();
  }

  /** Register `name` with `request`/`response` schemas; log each call with its caller. */
  private define(
    name: "greet" | "confirm" | "chart" | "facts",
    description: string,
    request: JsonSchema,
    response: JsonSchema,
    handler: (input: Record<string, unknown>, caller: string | null) => unknown,
  ) {
    const id = this.fn(name);
    this.iii.registerFunction(
      id,
      async (data: unknown) => {
        const raw = (data && typeof data === "object" && !Array.isArray(data) ? data : {}) as Record<string, unknown>;
        const caller = typeof raw._caller_worker_id === "string" ? raw._caller_worker_id : null;
        const { _caller_worker_id: _drop, ...input } = raw;
        const entry: LoggedCall = {
          at: Date.now(),
          function_id: id,
          caller,
          payload: data === undefined || data === null ? data : input,
          outcome: "pending",
        };
        this.calls = [entry, ...this.calls].slice(0, MAX_LOGGED_CALLS);
        this.changed();
        const started = performance.now();
        const settle = (outcome: "ok" | "error", result: unknown) => {
          entry.outcome = outcome;
          entry.result = result;
          entry.ms = performance.now() - started;
          this.calls = [...this.calls];
          this.changed();
        };
        const problems = validate(request, input);
        if (problems.length) {
          const message = `invalid input for ${id}: ${problems.map((p) => `${p.path || "payload"} ${p.message}`).join("; ")}`;
          settle("error", message);
          throw new IIIError("invalid_input", message);
        }
        try {
          const result = await handler(input, caller);
          settle("ok", result);
          return result;
        } catch (e) {
          settle("error", e instanceof Error ? e.message : String(e));
          throw e;
        }
      },
      { description, request_format: request, response_format: response, metadata: { console: true } },
    );
  }

  private registerShowcase(): void {
    this.define(
      "greet",
      "Greets the caller from this browser tab",
      {
        type: "object",
        properties: { name: { type: "string", minLength: 1, description: "who is calling" } },
        required: ["name"],
        additionalProperties: false,
      },
      { type: "object", properties: { greeting: { type: "string" } }, required: ["greeting"] },
      ({ name }) => ({ greeting: `Hello, ${String(name)}, from ${this.prefix}` }),
    );

    this.define(
      "confirm",
      "Asks the person at this tab to confirm; answers what they chose (declined after 25 s without an answer)",
      {
        type: "object",
        properties: { question: { type: "string", minLength: 1, maxLength: 500 } },
        required: ["question"],
        additionalProperties: false,
      },
      {
        type: "object",
        properties: {
          confirmed: { type: "boolean" },
          answered_by: { type: "string", enum: ["person", "timeout"] },
          waited_ms: { type: "number" },
        },
        required: ["confirmed", "answered_by", "waited_ms"],
      },
      ({ question }, caller) => this.ask(String(question), caller),
    );

    this.define(
      "chart",
      "Draws a bar chart of the points it is sent, in this tab (inline SVG)",
      {
        type: "object",
        properties: {
          title: { type: "string", maxLength: 120 },
          points: {
            type: "array",
            minItems: 1,
            maxItems: MAX_CHART_POINTS,
            items: {
              type: "object",
              properties: { label: { type: "string", minLength: 1, maxLength: 40 }, value: { type: "number" } },
              required: ["label", "value"],
              additionalProperties: false,
            },
          },
        },
        required: ["points"],
        additionalProperties: false,
      },
      { type: "object", properties: { drawn: { type: "integer" }, shown_on: { type: "string" } }, required: ["drawn", "shown_on"] },
      (input, caller) => {
        const points = input.points as { label: string; value: number }[];
        this.chart = { title: typeof input.title === "string" ? input.title : "Chart", points, caller, at: Date.now() };
        this.changed();
        return { drawn: points.length, shown_on: this.prefix };
      },
    );

    this.define(
      "facts",
      "Reads what only the browser knows: time zone, languages, screen, online, colour scheme",
      {
        type: "object",
        properties: {},
        additionalProperties: false,
      },
      {
        type: "object",
        properties: {
          time_zone: { type: "string" },
          local_time: { type: "string" },
          languages: { type: "array", items: { type: "string" } },
          screen: { type: "object" },
          online: { type: "boolean" },
          prefers_dark: { type: "boolean" },
          visible: { type: "boolean" },
        },
      },
      () => ({
        time_zone: Intl.DateTimeFormat().resolvedOptions().timeZone,
        local_time: new Date().toString(),
        languages: [...navigator.languages],
        screen: {
          width: screen.width,
          height: screen.height,
          pixel_ratio: devicePixelRatio,
          viewport: { width: innerWidth, height: innerHeight },
        },
        online: navigator.onLine,
        prefers_dark: matchMedia("(prefers-color-scheme: dark)").matches,
        visible: document.visibilityState === "visible",
      }),
    );
  }

  /** One question at a time on screen; the rest wait their turn (each with its own deadline). */
  private ask(
    question: string,
    caller: string | null,
  ): Promise<{ confirmed: boolean; answered_by: "person" | "timeout"; waited_ms: number }> {
    const asked = Date.now();
    return new Promise((resolve) => {
      let done = false;
      const pending: PendingConfirm = {
        id: this.nextConfirm++,
        question,
        caller,
        deadline: asked + CONFIRM_TIMEOUT_MS,
        answer: (confirmed) => finish(confirmed, "person"),
      };
      const timer = setTimeout(() => finish(false, "timeout"), CONFIRM_TIMEOUT_MS);
      const finish = (confirmed: boolean, by: "person" | "timeout") => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        this.confirmQueue = this.confirmQueue.filter((c) => c !== pending);
        if (this.confirm === pending) this.confirm = this.confirmQueue[0];
        this.changed();
        resolve({ confirmed, answered_by: by, waited_ms: Date.now() - asked });
      };
      this.confirmQueue.push(pending);
      if (!this.confirm) this.confirm = pending;
      this.changed();
    });
  }
}
