// A raw iii wire client for workerd tests: one WebSocket to the engine Worker's front door,
// every frame it receives kept in order, and small helpers to wait for, call and serve. It speaks
// the frames of protocol/README.md §3 by hand, so the tests see exactly what the engine sends.
import { evictDurableObject, runInDurableObject } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { Wire } from "./wire-core.ts";

export * from "./wire-core.ts";

Wire.opener = async (path, grant) => {
  const res = grant
    ? await env.ENGINE.getByName(path.startsWith("/ns/") ? path.slice(4) : "default").fetch(`http://localhost${path}`, {
        headers: { Upgrade: "websocket", "x-iii-grant": JSON.stringify(grant) },
      })
    : await exports.default.fetch(`http://localhost${path}`, { headers: { Upgrade: "websocket" } });
  if (res.status !== 101 || !res.webSocket) throw new Error(`upgrade of ${path} failed: ${res.status} ${await res.text()}`);
  const ws = res.webSocket;
  ws.accept();
  return ws;
};

/** The Engine object iii-sdk's default namespace lives in. */
export const engineStub = () => env.ENGINE.getByName("default");

/**
 * Hand `frames` to the engine object's own webSocketMessage handler for the socket `match` picks,
 * all in one instant of the engine's injected clock. workerd delivers socket messages to the object
 * more slowly than a budget refills on a loaded machine, and a loop that outlasts a refill would
 * measure the machine: with the clock held still, how many a budget admits is the same everywhere.
 */
export async function deliverInOneInstant(
  match: (attachment: Record<string, unknown>) => boolean,
  frames: Iterable<string | ArrayBuffer>,
): Promise<void> {
  await runInDurableObject(engineStub(), async (instance, state) => {
    const ws = state.getWebSockets().find((s) => {
      const a = s.deserializeAttachment() as Record<string, unknown> | null;
      return a !== null && match(a);
    });
    if (!ws) throw new Error("socket not found in the object");
    // The namespace's own object has the engine role (engine-do/src/object/engine-role.ts).
    const obj = instance as unknown as {
      webSocketMessage(ws: WebSocket, m: string | ArrayBuffer): unknown;
      role: { core: { ports: { clock: { now(): number } } } };
    };
    const clock = obj.role.core.ports.clock;
    const running = Object.getOwnPropertyDescriptor(clock, "now");
    const instant = clock.now();
    clock.now = () => instant;
    try {
      for (const f of frames) void obj.webSocketMessage(ws, f);
    } finally {
      if (running) Object.defineProperty(clock, "now", running);
      else delete (clock as { now?: unknown }).now;
    }
  });
}

/** Evict the engine object; hibernatable sockets stay open (docs/engineering.md Toolchain §5). */
export async function evictEngine(name = "default"): Promise<void> {
  await evictDurableObject(env.ENGINE.getByName(name), { webSockets: "hibernate" });
}
