// Where the BPE rank tables come from: the "rank loader" port. The tables are 1–2 MB each, and inside
// the engine's Worker script they would be parsed on every isolate start and copied into workerd's
// config on every local start (most of the script's size), counted or not. So in a Worker they are
// static assets (wrangler.toml [assets]: the build writes them under /_iii/tokenizer/, a path the
// Worker answers itself, so only the ASSETS binding reaches them), read once per isolate on the
// first count; in Node they are gpt-tokenizer's own modules. `#default-ranks` (package.json
// "imports") picks the default by the bundler's conditions, so the Worker bundle never includes the
// package's tables; the Worker's composition passes the assets loader in (index.ts, from env.ASSETS).
import { IIIError } from "@iii-edge/protocol";

export type EncodingName = "o200k_base" | "cl100k_base";
export const ENCODINGS: readonly EncodingName[] = ["o200k_base", "cl100k_base"];

/** gpt-tokenizer's table: index = rank, value = the token's text, or its bytes when not UTF-8. */
export type RankTable = readonly (string | readonly number[])[];

export interface RankLoader {
  /** Names the source in errors and keys the per-isolate cache of built encoders. */
  readonly source: string;
  load(name: EncodingName): Promise<RankTable>;
}

/** Entries of each table (tiktoken's mergeable ranks). A table of another length is not this
 * encoding, and would give wrong counts without failing: refused. */
export const RANK_TABLE_SIZES: Readonly<Record<EncodingName, number>> = { o200k_base: 199_998, cl100k_base: 100_256 };

/** The static-asset folder of the tables (under /_iii/, which the Worker routes itself and answers
 * 404 for from outside: the ASSETS binding is the one way in). */
export const RANK_ASSET_DIR = "/_iii/tokenizer/";
export const rankAssetPath = (name: EncodingName): string => `${RANK_ASSET_DIR}${name}.json`;

/** Counting cannot start: the encoding's table did not load. Never a guessed count instead. */
export class TokenizerUnavailableError extends IIIError {
  readonly encoding: EncodingName;
  constructor(encoding: EncodingName, message: string, options?: { cause?: unknown }) {
    super("tokenizer_unavailable", `${encoding} rank table: ${message}`, options);
    this.encoding = encoding;
  }
}

/** The table as loaded, checked to be the encoding's: an array of its length, entries text or bytes. */
export function checkRankTable(name: EncodingName, table: unknown, source: string): RankTable {
  const size = RANK_TABLE_SIZES[name];
  if (!Array.isArray(table)) throw new TokenizerUnavailableError(name, `${source} gave ${typeof table}, not a table`);
  if (table.length !== size) throw new TokenizerUnavailableError(name, `${source} gave ${table.length} entries, the encoding has ${size}`);
  // The ends are where a truncated or mixed-up table shows; every entry is read again when the
  // encoder is built.
  for (const i of [0, size - 1]) {
    const v: unknown = table[i];
    if (typeof v !== "string" && !Array.isArray(v)) throw new TokenizerUnavailableError(name, `${source}: entry ${i} is not a token`);
  }
  return table as RankTable;
}

/** What the ASSETS binding is used as: a fetch. */
export interface AssetFetcher {
  fetch(input: Request | string, init?: RequestInit): Promise<Response>;
}

export const isAssetFetcher = (v: unknown): v is AssetFetcher =>
  typeof v === "object" && v !== null && typeof (v as { fetch?: unknown }).fetch === "function";

/** The tables from the Worker's static assets (the build writes them: demo-app/vite.config.ts). */
export function assetRanks(assets: AssetFetcher): RankLoader {
  return {
    source: "assets",
    async load(name) {
      const path = rankAssetPath(name);
      let res: Response;
      try {
        // The ASSETS binding reads the path; the host is not looked at.
        res = await assets.fetch(`https://assets.invalid${path}`);
      } catch (e) {
        throw new TokenizerUnavailableError(name, `fetching ${path} from ASSETS failed`, { cause: e });
      }
      if (res.status !== 200) {
        await res.body?.cancel();
        throw new TokenizerUnavailableError(
          name,
          `ASSETS answered ${res.status} for ${path} (the static assets are built without it: run \`npm run build\`)`,
        );
      }
      try {
        // Its shape is checked where every loader's table is (checkRankTable, in loadEncoding).
        return (await res.json()) as RankTable;
      } catch (e) {
        throw new TokenizerUnavailableError(name, `${path} is not JSON`, { cause: e });
      }
    },
  };
}

/** A loader that always refuses, saying why (the default where no tables can be reached). */
export function noRanks(reason: string): RankLoader {
  return {
    source: "none",
    load: (name) => Promise.reject(new TokenizerUnavailableError(name, reason)),
  };
}
