// JSON values as the protocol sees them: canonical text byte-identical to Python's
// `state_to_json`, and plain-object maps that are safe for ids off the wire.
// Pure; shared by payloads.js and reducer.js. Plain ES module, no build step.

/**
 * Key-sorted, whitespace-free JSON of any JSON value, byte-identical to Python's
 * `json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False)`.
 */
export function canonicalJson(value) {
  if (value === null || typeof value === "string" || typeof value === "boolean") {
    return JSON.stringify(value);
  }
  if (typeof value === "number") {
    // Python would write NaN/Infinity, which is not JSON; refuse rather than diverge.
    if (!Number.isFinite(value)) throw new TypeError(`not a JSON number: ${value}`);
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (typeof value === "object") {
    const keys = Object.keys(value).sort(compareCodePoints);
    const members = keys.map((key) => `${JSON.stringify(key)}:${canonicalJson(value[key])}`);
    return `{${members.join(",")}}`;
  }
  throw new TypeError(`not a JSON value: ${typeof value}`);
}

/**
 * Python orders str by code point; JS `<` compares UTF-16 code units, which puts astral
 * characters (surrogate pairs, D800–DBFF) before U+E000–U+FFFF. Compare code points instead.
 */
export function compareCodePoints(a, b) {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  if (i === n) return a.length - b.length;
  // Step back onto a shared lead surrogate, so codePointAt reads whole characters.
  const previous = i > 0 ? a.charCodeAt(i - 1) : 0;
  if (previous >= 0xd800 && previous <= 0xdbff) i--;
  return a.codePointAt(i) - b.codePointAt(i);
}

// -- plain-object maps ---------------------------------------------------------------------
// Entity maps are keyed by ids that come off the wire; `own`/`put` keep a key such as
// "__proto__" or "constructor" an ordinary entry instead of reaching Object.prototype.

export function own(map, key) {
  return Object.prototype.hasOwnProperty.call(map, key) ? map[key] : undefined;
}

export function put(map, key, value) {
  Object.defineProperty(map, key, { value, writable: true, enumerable: true, configurable: true });
}

/** A deep copy of a JSON value, its keys written with `put`. */
export function clone(value) {
  if (value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map(clone);
  const copy = {};
  for (const key of Object.keys(value)) put(copy, key, clone(value[key]));
  return copy;
}
