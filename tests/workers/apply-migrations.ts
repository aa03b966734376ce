// Runs once per test file (idempotent): each file gets fresh storage (docs/engineering.md,
// Toolchain §5).
import { applyD1Migrations } from "cloudflare:test";
import { env } from "cloudflare:workers";

await applyD1Migrations(env.DB, env.TEST_MIGRATIONS);
