// The rank tables as the Worker's static-asset files (ranks.ts: a Worker reads them through its
// ASSETS binding). The console's build writes them into the assets folder it makes
// (demo-app/vite.config.ts), so every build of the Worker's assets carries the tables of the
// gpt-tokenizer it was built with. Build time, in Node: the same tables the Node default reads.
import { defaultRanks } from "./ranks-package.ts";
import { checkRankTable, ENCODINGS, rankAssetPath } from "./ranks.ts";

/** One file per encoding: its path in the assets folder and its JSON. */
export async function rankAssetFiles(): Promise<{ fileName: string; source: string }[]> {
  return Promise.all(
    ENCODINGS.map(async (name) => ({
      fileName: rankAssetPath(name).slice(1),
      source: JSON.stringify(checkRankTable(name, await defaultRanks.load(name), defaultRanks.source)),
    })),
  );
}
