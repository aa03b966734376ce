// Limits shared by the engine and the SDKs. Each is a named constant with the reason for its value.

/** Largest text frame the engine accepts: a DO SQLite row holds at most 2 MB, and a state value or
 * payload has to fit in one with room for its key and bookkeeping. */
export const MAX_FRAME_BYTES = 1024 * 1024;

/** Largest stored state / stream value (JSON text), same reason as MAX_FRAME_BYTES. */
export const MAX_VALUE_BYTES = 1024 * 1024;

/** Engine-side deadline for a call that does not choose its own (iii-sdk's client default too). */
export const DEFAULT_INVOKE_TIMEOUT_MS = 30_000;

/** Longest deadline a call may ask for (`timeout_ms` of `invokefunction`, of `trigger()`): a model
 * turn or a slow HTTP API fits in it; an open call holds a slot of its caller's and target's bounds. */
export const MAX_INVOKE_TIMEOUT_MS = 15 * 60_000;

/** Longest `invocation_id` (UTF-16 units): the caller picks it, the engine keeps it for every open
 * call (a UUID is 36). */
export const MAX_INVOCATION_ID_LENGTH = 128;
/** Longest function, trigger or trigger-type id (UTF-16 units): a namespaced name with room to
 * spare; every listing entry carries it. */
export const MAX_ID_LENGTH = 512;
/** Most items one `stream::set_many` stores: a turn step's events (a function-call round emits ~8,
 * a burst of streamed deltas a few dozen) in one call; the items also share one frame, so most of
 * them are small, and one transaction of this many rows keeps the object's thread free. */
export const MAX_STREAM_SET_MANY_ITEMS = 256;
/** Longest queue name or enqueue idempotency key of a call's `action` (UTF-16 units). */
export const MAX_QUEUE_NAME_LENGTH = 256;
/** What a namespace may be called: it is the engine object's name and a path segment (`/ns/<ns>`). */
export const NAMESPACE_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;

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

// ---------------------------------------------------------------- floods and hostile input
// What one socket (control, channel or stream alike) may send, and what a frame may be. The engine's
// own budgets (its fair share under load, error replies, log lines) are in
// engine-do/src/core/socket-budget.ts.

/** Bytes per second one socket may send, sustained: eight MAX_FRAME_BYTES frames a second is far
 * more than a worker's registrations and state writes, and parsing that much JSON costs the object
 * ~20–40 ms of each second. Past it, frames are dropped like frames past FRAMES_PER_SECOND. */
export const BYTES_PER_SECOND = 8 * 1024 * 1024;
/** Byte burst on top of BYTES_PER_SECOND: sixteen MAX_FRAME_BYTES frames back to back (a
 * reconnect replaying large schemas, a channel writer's first chunks). */
export const BYTE_BURST = 16 * 1024 * 1024;
/** How long a socket may stay over its frame or byte budget after the engine told it so
 * (`rate_limited`) before it is closed with FLOOD_CLOSE_CODE. A client that reacts at all backs off
 * within a round trip; one that keeps flooding this long only fills the runtime's queue. */
export const FLOOD_GRACE_MS = 2_000;
/** Close code of a socket closed for flooding: 1008, policy violation (RFC 6455 §7.4.1). */
export const FLOOD_CLOSE_CODE = 1008;
/** Frames per second one channel end may send, and its burst (its bytes are bounded as above).
 * Each chunk costs the engine object its relay to the reader (it cost ~300 µs under wrangler dev
 * while every chunk read its channel's row from SQLite), and 1 000 a second leaves most of the
 * object to everything else; streaming sources (Node streams, model tokens) send far fewer, larger
 * chunks. A channel end over it is closed at
 * once: a chunk dropped would corrupt the stream. */
export const CHANNEL_FRAMES_PER_SECOND = 1_000;
export const CHANNEL_FRAME_BURST = 2_000;
/** Frames per second a browser stream socket (`/_iii/streams`) may send, and its burst: join and
 * leave messages, each a SQLite write and a reply. A page joins at most 256 subscriptions
 * (MAX_SUBSCRIPTIONS_PER_SOCKET) at once; the burst is twice that. */
export const STREAM_SOCKET_FRAMES_PER_SECOND = 100;
export const STREAM_SOCKET_FRAME_BURST = 512;
/** Deepest JSON nesting the engine accepts in a frame, an invoke payload or a stored value (the
 * outermost object or array is level 1). 128 is serde_json's default recursion limit, so anything
 * iii's Rust engine and SDK can parse is accepted; a recursive JSON.stringify or structured clone
 * overflows the stack thousands of levels further down, so nothing accepted can crash on the way out. */
export const MAX_JSON_DEPTH = 128;

/** Longest key of a keyed function's call (UTF-16 units, protocol/src/keyed.ts): it names one
 * instance (a Durable Object by name, a database in Node) and goes into logs and span attributes;
 * a UUID, an email or a composite id fits with room to spare. */
export const MAX_KEY_LENGTH = 256;
/** What a key may hold: printable ASCII without space, slash, backslash, quotes or `%`, so it is
 * safe as it is in a log line, an object name and a span attribute, and cannot climb a path. */
export const KEY_PATTERN = /^[A-Za-z0-9._:@+=~-]+$/;
/** What a keyed function's key field may be called: a plain JSON property name. */
export const KEY_FIELD_PATTERN = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
/** Calls one keyed instance holds waiting for their turn (they run one at a time): past it the
 * caller is answered `too_many_calls` at once rather than queued behind minutes of work. */
export const MAX_KEYED_WAITING = 1_000;
