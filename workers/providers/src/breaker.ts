// A per-provider circuit breaker: a provider that keeps failing is not called again for a while, so
// a run with fallback models moves on at once and one without fails fast instead of spending its
// retries (seconds each) against an outage. Closed → open after BREAKER_FAILURE_THRESHOLD failed
// streams in a row; open → half-open after BREAKER_COOL_DOWN_MS on the injected clock, where one
// trial stream goes through: success closes it, failure opens it again for another cool-down.
// It lives in the providers worker's memory (one per isolate): a breaker is a local guess about a
// provider's health, and losing it on a restart costs at most one more round of failed calls.

/** A failed stream has already spent its retries (StreamLimits.max_attempts), so three in a row is
 * nine failed requests: an outage or a hard rate limit, not a blip. */
export const BREAKER_FAILURE_THRESHOLD = 3;
/** As long as the longest `retry-after` a stream waits out (DEFAULT_LIMITS.max_retry_after_ms): a
 * provider that asked for longer is not asked again sooner than it would have waited anyway. */
export const BREAKER_COOL_DOWN_MS = 30_000;

export interface BreakerSettings {
  failure_threshold: number;
  cool_down_ms: number;
}

export const DEFAULT_BREAKER: BreakerSettings = { failure_threshold: BREAKER_FAILURE_THRESHOLD, cool_down_ms: BREAKER_COOL_DOWN_MS };

export type BreakerState = "closed" | "open" | "half_open";

/** What `admit` answered: go ahead (maybe as the half-open trial), or not before `retry_at`. */
export type Admission = { ok: true; trial: boolean } | { ok: false; retry_at: number; failures: number };

export class CircuitBreaker {
  private failures = 0;
  private openedAt: number | undefined;
  private trialInFlight = false;

  private readonly settings: BreakerSettings;
  private readonly now: () => number;

  constructor(settings: BreakerSettings, now: () => number) {
    this.settings = settings;
    this.now = now;
  }

  get state(): BreakerState {
    if (this.openedAt === undefined) return "closed";
    return this.now() - this.openedAt >= this.settings.cool_down_ms ? "half_open" : "open";
  }

  /** Whether a stream may call the provider now. While half-open only one trial is let through;
   * the others fail fast until it has answered. */
  admit(): Admission {
    const state = this.state;
    if (state === "closed") return { ok: true, trial: false };
    if (state === "half_open" && !this.trialInFlight) {
      this.trialInFlight = true;
      return { ok: true, trial: true };
    }
    return { ok: false, retry_at: (this.openedAt ?? this.now()) + this.settings.cool_down_ms, failures: this.failures };
  }

  /** The provider answered (a stream got its response): closed, count cleared. */
  succeeded(): void {
    this.failures = 0;
    this.openedAt = undefined;
    this.trialInFlight = false;
  }

  /** The provider was rate-limited, down or cut before answering, retries spent. */
  failed(): void {
    this.failures += 1;
    const wasTrial = this.trialInFlight;
    this.trialInFlight = false;
    if (wasTrial || this.failures >= this.settings.failure_threshold) this.openedAt = this.now();
  }

  /** The admitted stream ended without telling anything about the provider (cancelled, a bad
   * request, no credential): a half-open trial slot is handed back. */
  released(): void {
    this.trialInFlight = false;
  }
}
