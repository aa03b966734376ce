// What every console screen is given by the shell (demo-app/src/app). A screen is a Preact
// component, default-exported from demo-app/src/screens/<name>/index.tsx, mounted at #/<name>.
import type { BrowserClient } from "@iii-edge/sdk-browser";

/** The tab's connection to the engine; every screen marks what it shows as stale unless "open". */
export type ConnectionStatus = "connecting" | "open" | "reconnecting" | "refused" | "unreachable";

export interface ScreenProps {
  /** This tab, registered as a worker: calls (`iii.trigger`), registrations, discovery. */
  iii: BrowserClient;
  status: ConnectionStatus;
  /** The query part of the hash route, e.g. `#/traces?trace_id=…` → trace_id. */
  params: URLSearchParams;
  /** Go to another screen: `navigate("/traces?trace_id=" + id)`. */
  navigate(to: string): void;
}
