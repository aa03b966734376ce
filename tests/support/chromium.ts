// Debian's Chromium through playwright-core, as the browser suites launch it: a fresh profile,
// no background networking, every host but 127.0.0.1 unresolvable (docs/engineering.md,
// Toolchain §7–§8).
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { chromium, type BrowserContext } from "playwright-core";

export const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
];

export function launchChromium(): Promise<BrowserContext> {
  const profile = mkdtempSync(path.join(tmpdir(), "iii-edge-chromium-"));
  return chromium.launchPersistentContext(profile, { executablePath: "/usr/bin/chromium", headless: true, args: CHROMIUM_ARGS });
}
