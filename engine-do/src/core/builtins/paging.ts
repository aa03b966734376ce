// Pages of a listing (iii-edge extension of protocol/README.md §7): `offset`/`limit` over a listing
// in its order, cut short so a page always fits one frame, with `total` and `next_offset` beside
// the array. Shared by engine::*::list and state::list_groups.
import { IIIError, MAX_LIST_PAGE, MAX_RESULT_BYTES, jsonBytes, type Paging } from "@iii-edge/protocol";

export interface Page<T> {
  items: T[];
  /** Entries in the whole (filtered) listing. */
  total: number;
  /** Where the next page starts; absent on the last page. */
  next_offset?: number;
}

/** Room for the result object around the array: its key, `total` and `next_offset`. */
const PAGE_OVERHEAD_BYTES = 128;

/**
 * One page of `all` (already filtered and sorted): at most `limit` entries (default and most
 * MAX_LIST_PAGE) from `offset`, fewer when their JSON would pass `budget` bytes — `next_offset`
 * says where to go on. An entry that cannot fit a page on its own is `result_too_large`.
 */
export function pageOf<T>(all: readonly T[], q: Paging, what: string, budget = MAX_RESULT_BYTES): Page<T> {
  const offset = Math.min(q.offset ?? 0, all.length);
  return fitPage(all.slice(offset, offset + (q.limit ?? MAX_LIST_PAGE)), offset, all.length, what, budget);
}

/** The same for a window already read from `offset` (e.g. by SQL LIMIT/OFFSET) of `total` entries. */
export function fitPage<T>(window: readonly T[], offset: number, total: number, what: string, budget = MAX_RESULT_BYTES): Page<T> {
  const items: T[] = [];
  let bytes = PAGE_OVERHEAD_BYTES;
  for (const entry of window) {
    bytes += jsonBytes(entry) + 1; // and its comma
    if (bytes > budget) {
      if (items.length === 0) {
        throw new IIIError(
          "result_too_large",
          `${what} entry ${offset} alone is over the ${budget}-byte result limit; skip it with offset ${offset + 1}`,
        );
      }
      break;
    }
    items.push(entry);
  }
  const page: Page<T> = { items, total };
  const next = offset + items.length;
  if (next < total) page.next_offset = next;
  return page;
}
