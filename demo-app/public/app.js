// The demo app: a live view of the engine's catalog, and this tab as a worker.
import { registerWorker, z } from "/sdk/sdk-browser.js";

const $ = (id) => document.getElementById(id);
const tabId = Math.random().toString(36).slice(2, 8);
const tabName = `tab-${tabId}`;
const wsUrl = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/`;
$("ws-url").textContent = wsUrl;

// An engine with auth on (AUTH_SECRET) needs a token: open the page as `/#token=<token>` (mint one
// with `npm run token -- --sub NAME`). The fragment never reaches the server or its logs; the SDK
// offers the token as the WebSocket subprotocol `iii.bearer.<token>`. Without one the page works
// against an open local engine, as before.
const token = new URLSearchParams(location.hash.slice(1)).get("token") || undefined;

/** Every request this page makes to the engine's own API (`/_iii/*`) goes through here, with the
 * token as a Bearer header. Also on `window` for the console:
 * `await (await iiiFetch("/_iii/invoke", { method: "POST", body: '{"function_id":"state::list_groups"}' })).json()` */
function iiiFetch(path, init = {}) {
  const headers = new Headers(init.headers);
  if (token && !headers.has("authorization")) headers.set("authorization", `Bearer ${token}`);
  return fetch(path, { ...init, headers });
}
window.iiiFetch = iiiFetch;

const iii = registerWorker("/", { workerName: tabName, token });

iii.addConnectionStateListener((state) => {
  $("status").textContent = state;
  $("status").dataset.state = state;
  $("worker-id").textContent = iii.workerId ?? "";
  if (state === "connected") refresh();
  else markStale(state);
});

// Stale data. Everything the page lists came from the engine; while it is unreachable the lists and
// the last result stay on screen (still worth seeing) but are marked stale, with the time the link
// was lost, until fresh data replaces them: the lists on reconnect, the result with the next call.
let lostAt = null;
const LIVE_PANELS = ["functions-panel", "workers-panel"];
function markStale(state) {
  if (lostAt === null) lostAt = new Date();
  for (const id of LIVE_PANELS) $(id).dataset.stale = "true";
  if ($("call-result").textContent) $("call-result").dataset.stale = "true";
  const since = lostAt.toLocaleTimeString();
  $("stale").textContent = state === "failed"
    ? `Cannot connect to the engine: ${iii.connectionError?.message ?? "gave up"}. What is shown is from ${since} or earlier.`
    : `Engine unreachable since ${since} (${state}): the lists and the last result below are from before then.`;
  $("stale").hidden = false;
}
function markFresh(panel) {
  delete $(panel).dataset.stale;
  if (LIVE_PANELS.some((id) => $(id).dataset.stale)) return;
  $("stale").hidden = true;
  lostAt = null;
}

// This tab's own function: the backend, another tab or curl can call it.
const greetId = `${tabName}::greet`;
$("tab-fn").textContent = greetId;
$("curl").textContent = `curl -s ${location.origin}/_iii/invoke${token ? ` -H "Authorization: Bearer $III_TOKEN"` : ""} -d '{"function_id":"${greetId}","payload":{"name":"curl"}}'`;
let invoked = 0;
iii.registerFunction(greetId, ({ name }) => {
  invoked += 1;
  $("invoked").textContent = String(invoked);
  $("last-call").textContent = `— last from ${name} at ${new Date().toLocaleTimeString()}`;
  return { greeting: `Hello, ${name}, from ${tabName}` };
}, {
  description: "Greets the caller from this browser tab",
  input: z.object({ name: z.string().min(1) }),
  output: z.object({ greeting: z.string() }),
});

// Discovery is pushed: bind this tab's handlers to the engine's trigger types.
iii.registerFunction(`${tabName}::on-functions`, ({ functions }) => {
  renderFunctions(functions);
  markFresh("functions-panel");
}, { description: "Receives catalog changes", metadata: { internal: true } });
iii.registerTrigger({ type: "engine::functions-available", function_id: `${tabName}::on-functions`, config: {} });
iii.registerFunction(`${tabName}::on-workers`, () => refreshWorkers(), { description: "Receives worker changes", metadata: { internal: true } });
iii.registerTrigger({ type: "engine::workers-available", function_id: `${tabName}::on-workers`, config: {} });

let allFunctions = [];
$("show-internal").addEventListener("change", () => renderFunctions(allFunctions));

function renderFunctions(functions) {
  allFunctions = functions;
  const showInternal = $("show-internal").checked;
  const visible = functions.filter((f) => showInternal || !(f.function_id.startsWith("engine::") || f.metadata?.internal));
  $("fn-count").textContent = `(${visible.length})`;
  $("functions").replaceChildren(...visible.map((f) => {
    const li = document.createElement("li");
    const id = document.createElement("button");
    id.className = "link";
    id.textContent = f.function_id;
    id.addEventListener("click", () => { $("call-fn").value = f.function_id; $("call-payload").focus(); });
    const by = document.createElement("span");
    by.className = "by";
    by.textContent = f.worker_name;
    li.append(id, by);
    if (f.description) {
      const d = document.createElement("div");
      d.className = "desc";
      d.textContent = f.description;
      li.append(d);
    }
    return li;
  }));
  $("fn-options").replaceChildren(...functions.map((f) => Object.assign(document.createElement("option"), { value: f.function_id })));
}

async function refreshWorkers() {
  const { workers } = await iii.trigger({ function_id: "engine::workers::list", payload: {} });
  $("worker-count").textContent = `(${workers.length})`;
  $("workers").replaceChildren(...workers.map((w) => {
    const li = document.createElement("li");
    li.textContent = w.name;
    const by = document.createElement("span");
    by.className = "by";
    by.textContent = [w.runtime, `${w.function_count} fn`, w.id === iii.workerId ? "this tab" : ""].filter(Boolean).join(" · ");
    li.append(by);
    return li;
  }));
  markFresh("workers-panel");
}

async function refresh() {
  try {
    const { functions } = await iii.trigger({ function_id: "engine::functions::list", payload: { include_internal: true } });
    renderFunctions(functions);
    markFresh("functions-panel");
    await refreshWorkers();
  } catch (e) {
    console.warn("refresh failed", e);
  }
}

$("call-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const out = $("call-result");
  delete out.dataset.stale; // whatever shows next is this call's
  let payload;
  try {
    payload = JSON.parse($("call-payload").value || "null");
  } catch (e) {
    out.textContent = `payload is not JSON: ${e.message}`;
    out.dataset.kind = "error";
    return;
  }
  const started = performance.now();
  try {
    const isVoid = $("call-void").checked;
    const result = await iii.trigger({ function_id: $("call-fn").value.trim(), payload, action: isVoid ? { type: "void" } : undefined });
    out.dataset.kind = "ok";
    out.textContent = `${isVoid ? "sent" : "ok"} in ${(performance.now() - started).toFixed(1)} ms\n${JSON.stringify(result, null, 2) ?? ""}`;
  } catch (e) {
    out.dataset.kind = "error";
    out.textContent = `${e.code ?? "error"} after ${(performance.now() - started).toFixed(1)} ms\n${e.message}`;
  }
});
