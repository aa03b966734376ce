#!/usr/bin/env node
// `npm run -s token -- --sub NAME [--ns a,b] [--ttl SECONDS] [--allow GLOBS] [--register PREFIXES] [--bind TYPES] [--durable-bindings] [--sessions GLOBS]`
// prints a token for the engine, signed with AUTH_SECRET from the environment (or .dev.vars).
// Globs and prefixes are comma-separated; see docs/security.md for what each grants.
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { MIN_SECRET_BYTES, mintToken } from "@iii-edge/protocol/token";

const { values } = parseArgs({
  options: {
    sub: { type: "string" },
    ns: { type: "string", default: "*" },
    ttl: { type: "string", default: "86400" },
    allow: { type: "string" },
    register: { type: "string" },
    bind: { type: "string" },
    "durable-bindings": { type: "boolean", default: false },
    sessions: { type: "string" },
  },
});
const fail = (message: string): never => {
  console.error(`token: ${message}`);
  process.exit(2);
};
const list = (v: string | undefined) =>
  v === undefined
    ? undefined
    : v
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean);

function secret(): string {
  if (process.env.AUTH_SECRET) return process.env.AUTH_SECRET;
  const devVars = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", ".dev.vars");
  const line = existsSync(devVars) ? /^\s*AUTH_SECRET\s*=\s*"?([^"\n]+)"?\s*$/m.exec(readFileSync(devVars, "utf8")) : null;
  return line?.[1] ?? fail("AUTH_SECRET is not set (environment or .dev.vars)");
}

const s = secret();
if (new TextEncoder().encode(s).byteLength < MIN_SECRET_BYTES) fail(`AUTH_SECRET must be at least ${MIN_SECRET_BYTES} bytes`);
if (!values.sub) fail("--sub NAME is required");
const ttl = Number(values.ttl);
if (!Number.isFinite(ttl) || ttl <= 0) fail("--ttl must be a positive number of seconds");
const grant: Parameters<typeof mintToken>[1] = { sub: values.sub!, ns: list(values.ns) ?? ["*"] };
const call = list(values.allow);
const register = list(values.register);
const bind = list(values.bind);
// Agent sessions besides its own it may read and act on: `*` for an operator or console.
const sessions = list(values.sessions);
if (call) grant.call = call;
if (register) grant.register = register;
if (bind) grant.bind = bind;
// Off unless asked for: a binding made with engine::register_trigger then ends with the holder's connections.
if (values["durable-bindings"]) grant.durable_bindings = true;
if (sessions) grant.sessions = sessions;
console.log(await mintToken(s, grant, ttl));
