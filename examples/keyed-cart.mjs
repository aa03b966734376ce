// A keyed worker (docs/keyed-workers.md): a shopping cart per `cart_id`. Each cart's calls run one
// at a time on that cart's own instance with its own SQLite; here the instances live in this Node
// process (a node:sqlite file per cart), and the caller is the unmodified iii-sdk, through the
// engine like any other call. With `npm start` running in another terminal:
//   node --conditions=iii-edge-source examples/keyed-cart.mjs
// (the condition resolves the workspace's @iii-edge packages to their sources; an app that installed
// @iii-edge/sdk-edge needs no flag).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { keyed } from "@iii-edge/sdk-edge/worker";
import { runWorkers } from "@iii-edge/sdk-edge/worker-node";
import { registerWorker } from "iii-sdk";

const url = process.env.III_URL ?? "ws://127.0.0.1:8787";

const cart = {
  name: "cart",
  register(iii) {
    iii.registerFunction(
      "cart::add",
      keyed(({ item, qty = 1 }, ctx) => {
        ctx.sql.exec("CREATE TABLE IF NOT EXISTS items (name TEXT PRIMARY KEY, qty INTEGER NOT NULL)");
        ctx.sql.exec("INSERT INTO items (name, qty) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET qty = qty + excluded.qty", item, qty);
        return { cart_id: ctx.key, items: ctx.sql.exec("SELECT name, qty FROM items ORDER BY name") };
      }),
      { key: "cart_id", description: "Adds an item to the cart" },
    );
  },
};

// A fresh data directory, so every run starts with empty carts (a real worker keeps its own).
const keyedDir = mkdtempSync(path.join(tmpdir(), "keyed-cart-"));
const worker = runWorkers(url, [cart], { workerName: "cart-example", keyedDir, env: {} });
// OTel off: otherwise the SDK's telemetry socket and timers keep the process alive after shutdown().
const caller = registerWorker(url, { workerName: "cart-caller", otel: { enabled: false }, enableMetricsReporting: false });

/** The first call waits for the worker's registration to reach the engine. */
async function add(payload) {
  for (let attempt = 0; ; attempt++) {
    try {
      return await caller.trigger({ function_id: "cart::add", payload });
    } catch (e) {
      if (e?.code !== "function_not_found" || attempt >= 100) throw e;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

console.log("add   ", JSON.stringify(await add({ cart_id: "ada", item: "apple", qty: 2 })));
console.log("add   ", JSON.stringify(await add({ cart_id: "ada", item: "pear" })));
console.log("add   ", JSON.stringify(await add({ cart_id: "bob", item: "pear", qty: 5 })));
try {
  await add({ item: "plum" });
} catch (e) {
  console.log("no key", e.code);
}

await caller.shutdown();
await worker.shutdown();
rmSync(keyedDir, { recursive: true, force: true });
