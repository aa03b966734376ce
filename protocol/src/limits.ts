// Limits shared by the engine and the SDKs. Each is a named constant with the reason for its value.

/** Largest text frame the engine accepts: a DO SQLite row holds at most 2 MB, and a state value or
 * payload has to fit in one with room for its key and bookkeeping. */
export const MAX_FRAME_BYTES = 1024 * 1024;

/** Largest stored state / stream value (JSON text), same reason as MAX_FRAME_BYTES. */
export const MAX_VALUE_BYTES = 1024 * 1024;

/** Engine-side deadline for a call that does not choose its own (iii-sdk's client default too). */
export const DEFAULT_INVOKE_TIMEOUT_MS = 30_000;

/** Frames per second one connection may send, sustained, before the engine drops them. A DO
 * handles roughly 10–20k small messages/s in total; one connection may use most of it, not more. */
export const FRAMES_PER_SECOND = 10_000;
/** Burst allowance on top of the sustained rate (one second's worth). */
export const FRAME_BURST = 10_000;

/** Longest worker name / description the engine keeps (iii sanitises to 280 characters). */
export const MAX_WORKER_TEXT = 280;

/** Most functions, triggers or trigger types one connection may register: bounds the catalog a
 * single misbehaving worker can grow. */
export const MAX_REGISTRATIONS_PER_WORKER = 5_000;

/** Room kept in a result frame for the `invocationresult` envelope around a built-in's result: a
 * W3C `baggage` header may be 8192 bytes, plus `traceparent`, the invocation and function ids. */
export const RESULT_ENVELOPE_BYTES = 16 * 1024;
/** Largest result a listing built-in builds (state::list, engine::*::list): it has to fit one frame
 * (MAX_FRAME_BYTES) with its envelope, and the engine never builds a bigger one to find out. */
export const MAX_RESULT_BYTES = MAX_FRAME_BYTES - RESULT_ENVELOPE_BYTES;
/** Most entries one listing call returns, and the default page of engine::*::list: 1000 small
 * entries are ~100 KB, so an SDK that never pages (iii-sdk's state::list) keeps working for
 * scopes up to this size, and a caller that asks for more is told to page. */
export const MAX_LIST_PAGE = 1_000;

/** Largest `metadata` of a function or trigger binding (JSON, UTF-8 bytes): labels and a few
 * settings. Every listing entry carries it, so a page of the largest still holds ~60 entries. */
export const MAX_METADATA_BYTES = 16 * 1024;
/** Largest function / trigger type description (UTF-8 bytes): a paragraph or a model tool's
 * instructions; listings carry it too (same reason as MAX_METADATA_BYTES). */
export const MAX_DESCRIPTION_BYTES = 16 * 1024;
/** Largest `request_format` / `response_format` (and a trigger type's formats): the JSON Schema of a
 * real API is a few KiB; 64 KiB allows generous ones and keeps engine::functions::info (both
 * schemas, metadata and description) well inside one frame. */
export const MAX_SCHEMA_BYTES = 64 * 1024;
/** Largest trigger binding `config` (JSON): a route, a cron expression or a topic with a few options;
 * engine::registered-triggers::list carries every config. */
export const MAX_TRIGGER_CONFIG_BYTES = 16 * 1024;
/** Largest HTTP-invoked function `invocation` (JSON): a URL, a few headers and the auth reference. */
export const MAX_HTTP_INVOCATION_BYTES = 16 * 1024;
/** Largest engine::workers::register input (JSON): name, runtime, version, telemetry and metadata a
 * worker says about itself; engine::workers::list carries it for every connection. */
export const MAX_WORKER_INFO_BYTES = 16 * 1024;
