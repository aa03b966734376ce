// Runs before each test file of the workerd projects (workers, triggers, keyed). Their test
// processes run file after file in one workerd (`isolate: false`: one runtime start per process,
// not per file), so each file starts from nothing here: every Durable Object's storage deleted and
// its instance gone, then the D1 migrations applied (idempotent). docs/engineering.md, Toolchain §5.
import { applyD1Migrations, reset } from "cloudflare:test";
import { env } from "cloudflare:workers";

await reset();
await applyD1Migrations(env.DB, env.TEST_MIGRATIONS);
