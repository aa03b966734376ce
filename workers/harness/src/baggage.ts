// W3C baggage (https://www.w3.org/TR/baggage/): `key=value;prop,key2=value2`. The harness merges
// its own entries (`iii.session.id`, `iii.message.id`) into whatever baggage the caller sent, so
// every call nested under one turn carries them.

/** The W3C spec's minimum a platform must propagate: 64 list-members… */
export const MAX_BAGGAGE_MEMBERS = 64;
/** …and 8192 bytes. Past either, the caller's oldest members are dropped (ours are kept). */
export const MAX_BAGGAGE_BYTES = 8192;

// RFC 7230 token characters: what a baggage key may contain.
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** The list-members of a baggage header, keyed by key, in order (a repeated key keeps its last). */
export function parseBaggage(header: string | undefined): Map<string, string> {
  const members = new Map<string, string>();
  if (!header) return members;
  for (const raw of header.split(",")) {
    const member = raw.trim();
    const eq = member.indexOf("=");
    if (eq <= 0) continue;
    const key = member.slice(0, eq).trim();
    if (!TOKEN.test(key)) continue;
    members.delete(key);
    members.set(key, member);
  }
  return members;
}

/** Percent-encode a value: encodeURIComponent's output is all baggage-octets. */
const encodeValue = (value: string) => encodeURIComponent(value);

/** `incoming` headers (earliest first) merged, then `own` entries set over them; undefined values are skipped. */
export function mergeBaggage(incoming: readonly (string | undefined)[], own: Readonly<Record<string, string | undefined>>): string {
  const members = new Map<string, string>();
  for (const header of incoming) {
    for (const [key, member] of parseBaggage(header)) {
      members.delete(key);
      members.set(key, member);
    }
  }
  const mine: string[] = [];
  for (const [key, value] of Object.entries(own)) {
    if (value === undefined) continue;
    members.delete(key);
    mine.push(`${key}=${encodeValue(value)}`);
  }
  const theirs = [...members.values()];
  const bytes = (list: string[]) => new TextEncoder().encode(list.join(",")).length;
  while (theirs.length > 0 && (theirs.length + mine.length > MAX_BAGGAGE_MEMBERS || bytes([...theirs, ...mine]) > MAX_BAGGAGE_BYTES))
    theirs.shift();
  return [...theirs, ...mine].join(",");
}

/** The decoded value of `key` in a baggage header (tests and consumers). */
export function baggageValue(header: string | undefined, key: string): string | undefined {
  const member = parseBaggage(header).get(key);
  if (member === undefined) return undefined;
  const value = member
    .slice(member.indexOf("=") + 1)
    .split(";")[0]!
    .trim();
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}
