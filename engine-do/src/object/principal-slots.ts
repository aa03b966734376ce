// A principal's connections over every namespace (../principal-connections.ts): an Engine object
// takes a slot of the principal's counter for each worker or stream socket it accepts, and gives it
// back when the socket goes. The per-namespace bound is the core's (core/admission.ts).
import type { ErrorBody } from "@iii-edge/protocol";
import type { Log } from "../core/ports.ts";

export class PrincipalSlots {
  private readonly ctx: DurableObjectState;
  private readonly env: Env;
  private readonly log: Log;
  /** MAX_CONNECTIONS_PER_PRINCIPAL_ACROSS_NAMESPACES for this deployment (config.ts). */
  private readonly limit: number;

  constructor(ctx: DurableObjectState, env: Env, log: Log, limit: number) {
    this.ctx = ctx;
    this.env = env;
    this.log = log;
    this.limit = limit;
  }

  private lease(id: string): { object: string; id: string } {
    return { object: this.ctx.id.name ?? "default", id };
  }

  /** Take a slot of `sub`'s connections over every namespace for the socket `id`, or say why not.
   * Without the PRINCIPALS binding (plain workerd test setups) only the per-namespace bound applies;
   * a counter that cannot be reached lets the socket in (the per-namespace bound still holds) rather
   * than locking every client out. */
  async reserve(sub: string, id: string): Promise<ErrorBody | undefined> {
    if (!this.env.PRINCIPALS) return undefined;
    const limit = this.limit;
    try {
      const out = await this.env.PRINCIPALS.getByName(sub).reserve(this.lease(id), limit);
      if (out.ok) return undefined;
      return { code: "too_many_connections", message: `'${sub}' already holds ${limit} connections over all namespaces` };
    } catch (e) {
      this.log.warn("principal connection count unreachable; admitted on the per-namespace bound", { sub, error: String(e) });
      return undefined;
    }
  }

  /** The socket `id` that held a slot of `sub` is gone: give it back (a second call finds nothing). */
  release(sub: string, id: string): void {
    if (!this.env.PRINCIPALS) return;
    this.ctx.waitUntil(
      this.env.PRINCIPALS.getByName(sub)
        .release(this.lease(id))
        .catch(() => {}),
    );
  }
}
