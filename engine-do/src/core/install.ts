// Everything the engine provides out of the box, added to a core in one place.
import { installEngineFunctions } from "./builtins/engine-fns.ts";
import { installHookPoints } from "./builtins/hook-points.ts";
import { installLog } from "./builtins/log.ts";
import { installChannels, type ChannelHub } from "./channels/hub.ts";
import { installPubSub } from "./builtins/pubsub.ts";
import { installState } from "./builtins/state.ts";
import { installStreams, type Streams } from "./builtins/streams.ts";
import type { EngineApi } from "./api.ts";
import { MAX_STATE_BYTES_PER_PRINCIPAL, MAX_STATE_KEYS_PER_PRINCIPAL } from "./bounds.ts";
import type { QueueProducerLike } from "./queues/cloudflare-queue.ts";
import { parseQueueConfigs } from "./queues/config.ts";
import { D1DeadLetters, LocalDeadLetters, type D1Like } from "./queues/dead-letters.ts";
import { installQueueBuiltins } from "./queues/builtins.ts";
import { QueueRouter } from "./queues/router.ts";
import { installCron, type CronScheduler } from "./triggers/cron.ts";
import { installHttp, type HttpRoutes } from "./triggers/http.ts";
import { installTelemetry } from "./telemetry/builtins.ts";

export interface InstallOptions {
  /** Named queues, JSON (see queues/config.ts and wrangler.toml). */
  QUEUES?: string;
  /** D1 for dead letters; without it they stay in the object's SQLite. */
  DB?: D1Like;
  /** Cloudflare Queues producer; without it cloudflare-backed queues run on the durable backend. */
  DELIVERIES?: QueueProducerLike;
  /** Function ids run as middleware before every HTTP-trigger route, comma-separated. */
  HTTP_MIDDLEWARE?: string;
  /** Lower the per-principal state quota of bounds.ts (digits; anything else: the default). */
  MAX_STATE_KEYS_PER_PRINCIPAL?: string;
  MAX_STATE_BYTES_PER_PRINCIPAL?: string;
}

/** A positive whole number from a var, else `fallback`. */
const positive = (v: string | undefined, fallback: number): number => (v && /^\d+$/.test(v) && Number(v) > 0 ? Number(v) : fallback);

export interface Installed {
  queues: QueueRouter;
  cron: CronScheduler;
  http: HttpRoutes;
  streams: Streams;
  channels: ChannelHub;
}

export function installEngine(core: EngineApi, opts: InstallOptions = {}): Installed {
  installEngineFunctions(core);
  installLog(core);
  installHookPoints(core);
  installTelemetry(core, core.telemetry, opts.DB);
  const now = () => core.ports.clock.now();
  const deadLetters = opts.DB ? new D1DeadLetters(opts.DB, core.ports.namespace, now) : new LocalDeadLetters(core.ports.sql, now);
  let configs;
  try {
    configs = parseQueueConfigs(opts.QUEUES, opts.DELIVERIES !== undefined);
  } catch (e) {
    // A bad QUEUES var must not take the engine down: only `default` exists, and enqueues to the
    // other names fail with enqueue_error naming the problem in this log line.
    core.ports.log.warn("QUEUES configuration refused; only the default queue is available", {
      error: e instanceof Error ? e.message : String(e),
    });
    configs = parseQueueConfigs(undefined, opts.DELIVERIES !== undefined);
  }
  const queues = new QueueRouter(core, configs, deadLetters, opts.DELIVERIES);
  core.setQueueProvider(queues);
  // State writes store their trigger fires and `enqueue` messages on the durable queue.
  installState(core, queues, {
    keys: positive(opts.MAX_STATE_KEYS_PER_PRINCIPAL, MAX_STATE_KEYS_PER_PRINCIPAL),
    bytes: positive(opts.MAX_STATE_BYTES_PER_PRINCIPAL, MAX_STATE_BYTES_PER_PRINCIPAL),
  });
  core.addAlarmClient(queues.durable);
  installQueueBuiltins(core, queues);
  installPubSub(core, queues);
  const streams = installStreams(core);
  const cron = installCron(core);
  const channels = installChannels(core);
  const http = installHttp(
    core,
    (opts.HTTP_MIDDLEWARE ?? "")
      .split(",")
      .map((m) => m.trim())
      .filter(Boolean),
    channels,
  );
  return { queues, cron, http, streams, channels };
}
