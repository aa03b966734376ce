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
