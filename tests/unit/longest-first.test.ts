// The order `npm test` starts its files in (tests/support/longest-first.ts): heaviest first, and
// files that boot microVMs never side by side. The schedule below plays the order on three workers
// as vitest does (each worker takes the next file when its last one ends) with each file lasting
// its weight, and checks that no two microVM files overlap.
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { MICROVM_GAP_FILES, orderFiles, type WeighedFile } from "@iii-edge/test-support/longest-first";
import { describe, expect, it } from "vitest";

type F = WeighedFile<string>;
const file = (name: string, seconds: number | undefined, microvm = false, group = 0, size = 0): F => ({
  file: name,
  seconds,
  microvm,
  group,
  size,
});

/** Start and end of each file when `workers` run the order, each file lasting its weight. */
function schedule(order: string[], byName: Map<string, F>, workers = 3): Map<string, [number, number]> {
  const free = Array.from({ length: workers }, () => 0);
  const at = new Map<string, [number, number]>();
  for (const name of order) {
    const w = free.indexOf(Math.min(...free));
    const start = free[w];
    free[w] = start + (byName.get(name)?.seconds ?? 1);
    at.set(name, [start, free[w]]);
  }
  return at;
}

function overlappingMicrovmFiles(files: F[]): string[][] {
  const byName = new Map(files.map((f) => [f.file, f]));
  const at = schedule(orderFiles(files), byName);
  const vm = files.filter((f) => f.microvm).map((f) => f.file);
  const pairs: string[][] = [];
  for (const a of vm)
    for (const b of vm) {
      const [sa, ea] = at.get(a)!;
      const [sb, eb] = at.get(b)!;
      if (a < b && sa < eb && sb < ea) pairs.push([a, b]);
    }
  return pairs;
}

describe("longest-first order", () => {
  it("starts the heaviest files first, then unweighed files by size", () => {
    const files = [file("a", 5), file("b", 50), file("c", undefined, false, 0, 900), file("d", 20), file("e", undefined, false, 0, 100)];
    expect(orderFiles(files)).toEqual(["b", "d", "a", "c", "e"]);
  });

  it("keeps a project's group order: no file moves ahead of a lower group", () => {
    const files = [file("late", 90, false, 1), file("vm1", 60, true), file("vm2", 50, true), file("x", 1)];
    const order = orderFiles(files);
    expect(order.indexOf("late")).toBe(order.length - 1);
  });

  it("follows each microVM file with other files, where the weights alone would start them together", () => {
    // The three heaviest files boot VMs: by weight alone all three start at once.
    const files = [
      file("vm-a", 100, true),
      file("vm-b", 90, true),
      file("vm-c", 80, true),
      ...Array.from({ length: 30 }, (_, i) => file(`engine-${i}`, 30 - (i % 7))),
    ];
    const byWeight = [...files].sort((a, b) => (b.seconds ?? 0) - (a.seconds ?? 0)).map((f) => f.file);
    expect(byWeight.slice(0, 3)).toEqual(["vm-a", "vm-b", "vm-c"]);

    const order = orderFiles(files);
    expect([...order].sort()).toEqual(files.map((f) => f.file).sort());
    expect(order[0]).toBe("vm-a");
    const vmAt = order.flatMap((name, i) => (name.startsWith("vm-") ? [i] : []));
    for (let k = 1; k < vmAt.length; k++) expect(vmAt[k] - vmAt[k - 1]).toBeGreaterThan(MICROVM_GAP_FILES);
    expect(overlappingMicrovmFiles(files)).toEqual([]);
  });

  it("spaces microVM files by count even when their weights are unknown", () => {
    const files = [
      file("vm-a", undefined, true, 0, 5000),
      file("vm-b", undefined, true, 0, 4000),
      ...["x", "y", "z", "w"].map((n, i) => file(n, undefined, false, 0, 100 - i)),
    ];
    const order = orderFiles(files);
    expect(order.indexOf("vm-b") - order.indexOf("vm-a")).toBeGreaterThan(MICROVM_GAP_FILES);
  });

  it("still runs microVM files when nothing else is left, one after another", () => {
    const files = [file("vm-a", 10, true), file("vm-b", 9, true), file("x", 1)];
    expect(orderFiles(files)).toEqual(["vm-a", "x", "vm-b"]);
  });

  it("never overlaps two microVM files of the repository's own weights on three workers", () => {
    const json = JSON.parse(
      readFileSync(path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../support/file-weights.json"), "utf8"),
    ) as { microvm: string[]; seconds: Record<string, number> };
    expect(json.microvm.length).toBeGreaterThan(1);
    const files = Object.entries(json.seconds).map(([name, s]) => file(name, s, json.microvm.includes(name)));
    for (const name of json.microvm) if (!(name in json.seconds)) files.push(file(name, undefined, true));
    expect(overlappingMicrovmFiles(files)).toEqual([]);
  });
});
