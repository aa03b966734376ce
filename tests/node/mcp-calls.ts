// What both MCP client suites ask the engine (tests/unit/mcp-client.test.ts on the engine core,
// tests/node/mcp-client.test.ts against `npm start`), over whichever `invoke` the suite has.
export type Invoke = (function_id: string, payload: unknown) => Promise<{ result?: unknown; error?: { code: string; message: string } }>;

export function mcpCalls(invoke: Invoke) {
  /** The function ids listed under `prefix`, sorted. */
  const catalog = async (prefix = "mcp::") =>
    ((await invoke("engine::functions::list", { prefix })).result as { functions: { function_id: string }[] }).functions
      .map((f) => f.function_id)
      .sort();
  /** A tool's answer; a typed error becomes a thrown one naming the tool. */
  const callOk = async (function_id: string, payload: unknown) => {
    const r = await invoke(function_id, payload);
    if (r.error) throw new Error(`${function_id}: ${r.error.code}: ${r.error.message}`);
    return r.result as { content: { type: string; text: string }[]; structuredContent?: Record<string, unknown> };
  };
  return { catalog, callOk };
}
