// The tab's worker side (tab-worker.ts), for screens that show it.
import type { TabWorker } from "./tab-worker.ts";

let tab: TabWorker | undefined;
export function setTabWorker(t: TabWorker): void {
  tab = t;
}
export function tabWorker(): TabWorker {
  if (!tab) throw new Error("the tab worker is not set up yet");
  return tab;
}
