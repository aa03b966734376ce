// state::list and state::list_groups, bounded (iii-edge): a listing is sized in SQL before a value
// is read, so the engine never builds a result over MAX_RESULT_BYTES to find out it is too big.
import { IIIError, MAX_LIST_PAGE, MAX_RESULT_BYTES, type Paging } from "@iii-edge/protocol";
import type { Sql } from "../ports.ts";
import { fitPage, type Page } from "./paging.ts";

/**
 * SQL for a stored value's UTF-8 size. `octet_length` (SQLite 3.43+) reads it from the record
 * header; older SQLite lacks it, and `length(CAST … AS BLOB)` reads the value inside SQLite instead.
 */
function byteLengthSql(sql: Sql): string {
  try {
    sql.exec("SELECT octet_length('x')");
    return "octet_length(value)";
  } catch {
    return "length(CAST(value AS BLOB))";
  }
}

export interface StateListing {
  /** The values of `scope` in key order: all of them (at most MAX_LIST_PAGE), or one page. */
  values(scope: string, q: Paging): unknown[];
  /** Scopes holding a value, sorted, one page (default and most MAX_LIST_PAGE). */
  groups(q: Paging): Page<string>;
  /** The keys of `scope`, sorted, one page (default and most MAX_LIST_PAGE): the same order and
   * paging as `values`, so a page of each lines up key by value. */
  keys(scope: string, q: Paging): Page<string>;
}

export function stateListing(sql: Sql): StateListing {
  const bytes = byteLengthSql(sql);
  const sizeOf = `SELECT count(*) AS n, coalesce(sum(${bytes}), 0) AS size FROM (SELECT value FROM state WHERE scope = ? ORDER BY key LIMIT ? OFFSET ?)`;
  const howToPage = `page with {scope, limit (at most ${MAX_LIST_PAGE}), offset}; pages are in key order`;

  return {
    values(scope, q) {
      const paged = q.limit !== undefined || q.offset !== undefined;
      const offset = q.offset ?? 0;
      // Unpaged, one row more than a listing may hold tells "too many" from "exactly the most".
      const probe = paged ? (q.limit ?? MAX_LIST_PAGE) : MAX_LIST_PAGE + 1;
      const row = sql.exec<{ n: number; size: number }>(sizeOf, scope, probe, offset)[0];
      const n = Number(row?.n ?? 0);
      if (!paged && n > MAX_LIST_PAGE) {
        throw new IIIError(
          "result_too_large",
          `scope '${scope}' holds more than ${MAX_LIST_PAGE} keys, more than one state::list returns; ${howToPage}`,
        );
      }
      // The result is `[v1,v2,…]`: the values' JSON, the commas and the brackets.
      const resultBytes = Number(row?.size ?? 0) + Math.max(n - 1, 0) + 2;
      if (resultBytes > MAX_RESULT_BYTES) {
        const which = paged ? `the ${n} values from offset ${offset} of scope '${scope}'` : `the ${n} values of scope '${scope}'`;
        const fix = paged ? "ask for a smaller limit (a value too large to list on its own is read with state::get)" : howToPage;
        throw new IIIError(
          "result_too_large",
          `${which} come to ${resultBytes} bytes, over the ${MAX_RESULT_BYTES}-byte result limit; ${fix}`,
        );
      }
      if (n === 0) return [];
      return sql
        .exec<{ value: string }>("SELECT value FROM state WHERE scope = ? ORDER BY key LIMIT ? OFFSET ?", scope, n, offset)
        .map((r) => JSON.parse(r.value));
    },

    groups(q) {
      const offset = q.offset ?? 0;
      const total = Number(sql.exec<{ n: number }>("SELECT count(DISTINCT scope) AS n FROM state")[0]?.n ?? 0);
      // Scope names are at most 512 characters, so a window of MAX_LIST_PAGE stays small; the page
      // is cut to the byte budget after.
      const window = sql
        .exec<{ scope: string }>("SELECT DISTINCT scope FROM state ORDER BY scope LIMIT ? OFFSET ?", q.limit ?? MAX_LIST_PAGE, offset)
        .map((r) => r.scope);
      return fitPage(window, offset, total, "state::list_groups");
    },

    keys(scope, q) {
      const offset = q.offset ?? 0;
      const total = Number(sql.exec<{ n: number }>("SELECT count(*) AS n FROM state WHERE scope = ?", scope)[0]?.n ?? 0);
      const window = sql
        .exec<{ key: string }>(
          "SELECT key FROM state WHERE scope = ? ORDER BY key LIMIT ? OFFSET ?",
          scope,
          q.limit ?? MAX_LIST_PAGE,
          offset,
        )
        .map((r) => r.key);
      return fitPage(window, offset, total, "state::list_keys");
    },
  };
}
