// iii's RBAC worker model, offered on its own listener (`/rbac`, `/ns/<namespace>/rbac`) so iii's
// own clients use it unchanged: the operator's auth function turns a connection's handshake into an
// AuthResult; what the connection may call is what the listener exposes plus what the auth function
// allowed, minus what it forbade; optional hook functions may refuse or rewrite each registration,
// and an optional middleware function receives every call together with the caller's context.
// This file holds the listener's configuration (the RBAC var), the shapes iii's clients send and
// expect, and the one decision every part shares: may this connection call this function.
import { z } from "zod";
import { globMatch } from "./auth.ts";
import { MAX_METADATA_BYTES } from "./limits.ts";

/** A function id, pattern or hook id: what the wire allows for an id. */
const id = z.string().min(1).max(512);
/** Most patterns in one list (expose_functions, allowed_functions, forbidden_functions): the check
 * runs them for every call, so a list stays one a person would write. */
export const MAX_RBAC_PATTERNS = 256;
/** Largest `context` an auth function may answer (JSON, UTF-8 bytes). It travels with every call
 * the connection makes through the middleware, and into every hook: a claim set, not a document. */
export const MAX_RBAC_CONTEXT_BYTES = 8 * 1024;

/**
 * The error code of a call the listener refuses. iii's reference engine writes it in upper case and
 * iii's Python SDK raises its typed forbidden error only for this spelling, so the listener answers
 * iii's clients in iii's dialect. Everywhere else the engine writes `forbidden` (ERROR_CODES).
 */
export const RBAC_FORBIDDEN_CODE = "FORBIDDEN";

/**
 * Built-ins a connection may call whatever its lists say, as in iii: the SDKs call them on their own
 * (a worker describes itself right after connecting; a handler's logger writes through them), so
 * refusing them would break a client that never asked for them.
 */
export const RBAC_INFRASTRUCTURE_FUNCTIONS: ReadonlySet<string> = new Set([
  "engine::workers::register",
  "engine::channels::create",
  "engine::log::info",
  "engine::log::warn",
  "engine::log::error",
  "engine::log::debug",
  "engine::log::trace",
]);

/** `match("svc::*")` (iii's spelling, either quote) → `svc::*`; anything else as written. */
export function unwrapMatch(pattern: string): string {
  const m = /^\s*match\((["'])(.*)\1\)\s*$/s.exec(pattern);
  return m ? m[2]! : pattern;
}

const metadataValue = z.union([z.string().max(512), z.number(), z.boolean(), z.null()]);
/**
 * One `expose_functions` rule: `match("svc::*")` (or a bare `svc::*`), `{match: "svc::*"}`, or
 * `{metadata: {key: value}}` — a function whose registration metadata has every key with that value
 * (a string value may itself be `match("…")`).
 */
export const exposeRule = z.union([
  id,
  z.object({ match: id }).strict(),
  z
    .object({
      metadata: z.record(z.string().min(1).max(128), metadataValue).refine((m) => Object.keys(m).length > 0, "metadata rule needs a key"),
    })
    .strict(),
]);
export type ExposeRule = z.infer<typeof exposeRule>;

/** The RBAC var: which functions play which part, and what every connection may call. */
export const rbacConfigSchema = z
  .object({
    auth_function_id: id.optional(),
    middleware_function_id: id.optional(),
    on_function_registration_function_id: id.optional(),
    on_trigger_registration_function_id: id.optional(),
    on_trigger_type_registration_function_id: id.optional(),
    expose_functions: z.array(exposeRule).max(MAX_RBAC_PATTERNS).default([]),
  })
  .strict();
export type RbacConfig = z.infer<typeof rbacConfigSchema>;

/** What the auth function is sent (iii's AuthInput): the handshake, header names lower case. */
export interface RbacAuthInput {
  headers: Record<string, string>;
  query_params: Record<string, string[]>;
  ip_address: string;
}

const patterns = z.array(id).max(MAX_RBAC_PATTERNS);
const jsonContext = z
  .record(z.string(), z.unknown())
  .refine(
    (c) => new TextEncoder().encode(JSON.stringify(c)).byteLength <= MAX_RBAC_CONTEXT_BYTES,
    `context is larger than ${MAX_RBAC_CONTEXT_BYTES} bytes`,
  );

/** What the auth function answers (iii's AuthResult). A throw, a failure or anything else refuses. */
export const rbacAuthResult = z.object({
  allowed_functions: patterns.default([]),
  forbidden_functions: patterns.default([]),
  /** Trigger types the connection may bind; absent or null: any. */
  allowed_trigger_types: patterns.nullish(),
  allow_trigger_type_registration: z.boolean().default(false),
  allow_function_registration: z.boolean().default(true),
  context: jsonContext.nullish().transform((c) => c ?? {}),
  /** Every function id the connection registers (and binds) is `<prefix>::<id>`. */
  function_registration_prefix: z.string().min(1).max(128).nullish(),
});
export type RbacAuthResult = z.output<typeof rbacAuthResult>;

/**
 * What one connection of the listener carries from the front door to its engine object: the auth
 * function's answer and the listener's configuration as it was when the connection was accepted.
 */
export const rbacSessionSchema = z.object({
  allowed_functions: patterns,
  forbidden_functions: patterns,
  allowed_trigger_types: patterns.nullish(),
  allow_trigger_type_registration: z.boolean(),
  allow_function_registration: z.boolean(),
  context: z.record(z.string(), z.unknown()),
  function_registration_prefix: z.string().min(1).max(128).nullish(),
  config: rbacConfigSchema,
});
export type RbacSession = z.infer<typeof rbacSessionSchema>;

/** A session that could not be read back (a corrupt row, a mangled header): it allows nothing, so a
 * listener connection never falls back to the wider rights of its grant. */
export const RBAC_CLOSED_SESSION: RbacSession = Object.freeze({
  allowed_functions: [],
  forbidden_functions: ["*"],
  allowed_trigger_types: [],
  allow_trigger_type_registration: false,
  allow_function_registration: false,
  context: {},
  config: { expose_functions: [] },
}) as RbacSession;

/** What the middleware function is sent for each call a connection makes (iii's MiddlewareFunctionInput). */
export interface RbacMiddlewareInput {
  function_id: string;
  payload: unknown;
  action?: unknown;
  context: Record<string, unknown>;
}
/** What the on_function_registration hook is sent. */
export interface OnFunctionRegistrationInput {
  function_id: string;
  description?: string;
  metadata?: Record<string, unknown>;
  context: Record<string, unknown>;
}
/** What the on_trigger_registration hook is sent. */
export interface OnTriggerRegistrationInput {
  trigger_id: string;
  trigger_type: string;
  function_id: string;
  config: unknown;
  context: Record<string, unknown>;
}
/** What the on_trigger_type_registration hook is sent. */
export interface OnTriggerTypeRegistrationInput {
  trigger_type_id: string;
  description?: string;
  context: Record<string, unknown>;
}

// A hook allows with `true` or an object, whose non-null fields replace what was registered (iii's
// Python models dump unset fields as null); `false`, null, a throw or anything else refuses.
const hookAllows = <T extends z.ZodRawShape>(shape: T) => z.union([z.literal(true), z.object(shape).passthrough()]);
export const onFunctionRegistrationResult = hookAllows({
  function_id: id.nullish(),
  description: z.string().max(4096).nullish(),
  metadata: z
    .record(z.string(), z.unknown())
    .refine((m) => new TextEncoder().encode(JSON.stringify(m)).byteLength <= MAX_METADATA_BYTES)
    .nullish(),
});
export const onTriggerRegistrationResult = hookAllows({
  trigger_id: id.nullish(),
  trigger_type: id.nullish(),
  function_id: id.nullish(),
  config: z.unknown().optional(),
});
export const onTriggerTypeRegistrationResult = hookAllows({ trigger_type_id: id.nullish(), description: z.string().max(4096).nullish() });

/** Does one pattern (exact id, `*` glob, or `match("…")`) cover the id? */
export const rbacPatternMatches = (pattern: string, functionId: string): boolean => globMatch(unwrapMatch(pattern), functionId);

function exposes(rule: ExposeRule, functionId: string, metadata: Record<string, unknown> | undefined): boolean {
  if (typeof rule === "string") return rbacPatternMatches(rule, functionId);
  if ("match" in rule) return rbacPatternMatches(rule.match, functionId);
  if (!metadata) return false;
  return Object.entries(rule.metadata).every(([k, want]) => {
    const have = metadata[k];
    if (typeof want === "string" && typeof have === "string" && unwrapMatch(want) !== want) return globMatch(unwrapMatch(want), have);
    return have === want;
  });
}

/**
 * May a connection of the listener call this function? In iii's order: a forbidden pattern refuses
 * (even an infrastructure built-in); an allowed one admits; then the infrastructure built-ins; then
 * the listener's expose_functions rules (ids, or the function's registration metadata).
 */
export function rbacMayCall(
  s: Pick<RbacSession, "allowed_functions" | "forbidden_functions" | "config">,
  functionId: string,
  metadata?: Record<string, unknown>,
): boolean {
  if (s.forbidden_functions.some((p) => rbacPatternMatches(p, functionId))) return false;
  if (s.allowed_functions.some((p) => rbacPatternMatches(p, functionId))) return true;
  if (RBAC_INFRASTRUCTURE_FUNCTIONS.has(functionId)) return true;
  return s.config.expose_functions.some((r) => exposes(r, functionId, metadata));
}

/** The message of a refused call: names the function and where access is granted, as iii's does. */
export const rbacForbiddenMessage = (functionId: string): string =>
  `FORBIDDEN: function '${functionId}' is not available to this connection; expose it to every connection in rbac.expose_functions, or allow it for this one in the auth function's allowed_functions`;
