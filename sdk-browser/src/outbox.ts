// The offline outbox: `void` and `enqueue` calls made while the tab is disconnected are kept in
// IndexedDB (idb-keyval), survive a reload, and are sent once when the tab reconnects.
//
// Delivery: an entry is removed only after the socket accepted it, so a crash between the two
// resends it. Enqueue entries carry an idempotency key (the entry id) and the engine returns the
// first receipt for a repeat, so they are delivered exactly once. Void has no key on the wire:
// void entries are at least once per outbox entry (a resend needs a crash in that tiny window).
// Tabs of one origin share the store; a Web Lock keeps two tabs from draining it at once.
import { IIIError } from "@iii-edge/protocol";
import { createStore, del, entries, set, type UseStore } from "idb-keyval";
import type { Outbox, OutboxEntry } from "@iii-edge/sdk-edge/client";

/** Most entries kept per worker name: a tab offline for a long time must not fill the origin's
 * storage quota; older calls are kept, new ones refused with `not_connected`. */
export const MAX_OUTBOX_ENTRIES = 1000;

type Key = [string, number, string];

export interface IdbOutbox extends Outbox {
  /** Entries waiting to be sent. */
  size(): Promise<number>;
  clear(): Promise<void>;
}

export function idbOutbox(name: string, store: UseStore = createStore("iii-edge-outbox", "entries")): IdbOutbox {
  const mine = async (): Promise<[Key, OutboxEntry][]> =>
    (await entries<Key, OutboxEntry>(store)).filter(([k]) => Array.isArray(k) && k[0] === name);
  const locked = async <T>(fn: () => Promise<T>): Promise<T> => {
    const locks = typeof navigator !== "undefined" ? navigator.locks : undefined;
    return locks ? (locks.request(`iii-edge-outbox:${name}`, fn) as Promise<T>) : fn();
  };
  return {
    async put(entry) {
      if ((await mine()).length >= MAX_OUTBOX_ENTRIES) {
        throw new IIIError("not_connected", `offline and the outbox is full (${MAX_OUTBOX_ENTRIES} calls)`);
      }
      await set([name, entry.created_at, entry.id] satisfies Key, entry, store);
    },
    drain(send) {
      return locked(async () => {
        for (const [key, entry] of await mine()) {
          if (!send(entry)) return;
          await del(key, store);
        }
      });
    },
    size: async () => (await mine()).length,
    clear: () =>
      locked(async () => {
        for (const [key] of await mine()) await del(key, store);
      }),
  };
}
