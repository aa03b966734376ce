// Runs once per test file (idempotent): D1 gets the same schema `npm start` applies.
import { applyD1Migrations } from "cloudflare:test";
import { env } from "cloudflare:workers";

await applyD1Migrations(env.DB, env.TEST_MIGRATIONS);
