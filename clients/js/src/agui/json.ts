// Go's encoding/json, as far as the projection needs it, so that the
// TypeScript projection gives the very bytes the Go one does.
//
// Text is held as JS strings in which every byte that is not valid UTF-8
// is the lone surrogate U+DC00+byte (0x80..0xFF map to U+DC80..U+DCFF):
// Go strings are bytes, and a Go string that holds invalid UTF-8 is
// marshalled with \ufffd for each such byte, while a json.RawMessage
// passes them through. goString and goBytes convert.

import { strictUTF8Decoder as utf8Decoder, utf8Encoder } from "./text.js";

/** goString reads bytes as Go would hold them (see the file's comment). */
export function goString(b: Uint8Array): string {
  try {
    return utf8Decoder.decode(b);
  } catch {
    // Invalid somewhere: decode rune by rune as Go's utf8.DecodeRune.
  }
  let out = "";
  let i = 0;
  const n = b.length;
  while (i < n) {
    const c = b[i]!;
    if (c < 0x80) {
      let j = i + 1;
      while (j < n && j - i < 4096 && b[j]! < 0x80) j++;
      out += String.fromCharCode(...b.subarray(i, j));
      i = j;
      continue;
    }
    let size = 0;
    let cp = 0;
    if (c >= 0xc2 && c <= 0xdf && i + 1 < n && (b[i + 1]! & 0xc0) === 0x80) {
      size = 2;
      cp = ((c & 0x1f) << 6) | (b[i + 1]! & 0x3f);
    } else if (c >= 0xe0 && c <= 0xef && i + 2 < n) {
      const c1 = b[i + 1]!;
      const lo = c === 0xe0 ? 0xa0 : 0x80;
      const hi = c === 0xed ? 0x9f : 0xbf;
      if (c1 >= lo && c1 <= hi && (b[i + 2]! & 0xc0) === 0x80) {
        size = 3;
        cp = ((c & 0x0f) << 12) | ((c1 & 0x3f) << 6) | (b[i + 2]! & 0x3f);
      }
    } else if (c >= 0xf0 && c <= 0xf4 && i + 3 < n) {
      const c1 = b[i + 1]!;
      const lo = c === 0xf0 ? 0x90 : 0x80;
      const hi = c === 0xf4 ? 0x8f : 0xbf;
      if (c1 >= lo && c1 <= hi && (b[i + 2]! & 0xc0) === 0x80 && (b[i + 3]! & 0xc0) === 0x80) {
        size = 4;
        cp = ((c & 0x07) << 18) | ((c1 & 0x3f) << 12) | ((b[i + 2]! & 0x3f) << 6) | (b[i + 3]! & 0x3f);
      }
    }
    if (size === 0) {
      out += String.fromCharCode(0xdc00 + c);
      i++;
    } else {
      out += String.fromCodePoint(cp);
      i += size;
    }
  }
  return out;
}

/** hasLoneSurrogate reports whether s holds a surrogate not in a pair. */
function hasLoneSurrogate(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0xd800 || c > 0xdfff) continue;
    if (c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      i++;
      continue;
    }
    return true;
  }
  return false;
}

/** goBytes is the bytes of a string goString returned (its lone
 * U+DC80..U+DCFF back to the bytes they stand for). */
export function goBytes(s: string): Uint8Array {
  if (!hasLoneSurrogate(s)) return utf8Encoder.encode(s);
  const parts: number[] = [];
  for (let i = 0; i < s.length; i++) {
    let c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        const cp = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        parts.push(0xf0 | (cp >> 18), 0x80 | ((cp >> 12) & 0x3f), 0x80 | ((cp >> 6) & 0x3f), 0x80 | (cp & 0x3f));
        i++;
        continue;
      }
    }
    if (c >= 0xdc80 && c <= 0xdcff) {
      parts.push(c - 0xdc00);
    } else if (c < 0x80) {
      parts.push(c);
    } else {
      if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd;
      if (c < 0x800) parts.push(0xc0 | (c >> 6), 0x80 | (c & 0x3f));
      else parts.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f));
    }
  }
  return Uint8Array.from(parts);
}

/** byteLen is len() of the Go string s stands for. */
export function byteLen(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n++;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 4;
      i++;
    } else if (c >= 0xdc80 && c <= 0xdcff) n++;
    else n += 3;
  }
  return n;
}

// ---- Parsing (json.Valid, json.Unmarshal) --------------------------------

/** A parsed JSON value, with where its text is in the source. */
export type Node =
  | { k: "obj"; s: number; e: number; entries: [string, Node][] }
  | { k: "arr"; s: number; e: number; items: Node[] }
  | { k: "str"; s: number; e: number; v: string }
  | { k: "num"; s: number; e: number }
  | { k: "true" | "false" | "null"; s: number; e: number };

export interface Doc {
  src: string;
  root: Node;
}

const maxNestingDepth = 10000;

class SyntaxErr extends Error {}

/** parse reads src as Go's json.Valid does; undefined when invalid. */
export function parse(src: string): Doc | undefined {
  let i = 0;
  const n = src.length;
  const ws = () => {
    while (i < n) {
      const c = src.charCodeAt(i);
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) i++;
      else break;
    }
  };
  const fail = (): never => {
    throw new SyntaxErr();
  };
  const str = (): { k: "str"; s: number; e: number; v: string } => {
    const s = i;
    i++; // the quote
    let v = "";
    let start = i;
    for (;;) {
      if (i >= n) fail();
      const c = src.charCodeAt(i);
      if (c === 0x22) {
        v += src.slice(start, i);
        i++;
        return { k: "str", s, e: i, v };
      }
      if (c < 0x20) fail();
      if (c === 0x5c) {
        v += src.slice(start, i);
        i++;
        if (i >= n) fail();
        const e = src[i];
        switch (e) {
          case '"': v += '"'; i++; break;
          case "\\": v += "\\"; i++; break;
          case "/": v += "/"; i++; break;
          case "b": v += "\b"; i++; break;
          case "f": v += "\f"; i++; break;
          case "n": v += "\n"; i++; break;
          case "r": v += "\r"; i++; break;
          case "t": v += "\t"; i++; break;
          case "u": {
            const r = hex4(src, i + 1);
            if (r < 0) fail();
            i += 5;
            if (r >= 0xd800 && r <= 0xdfff) {
              // Go: a valid pair, or U+FFFD for the first alone.
              if (r <= 0xdbff && src[i] === "\\" && src[i + 1] === "u") {
                const r2 = hex4(src, i + 2);
                if (r2 >= 0xdc00 && r2 <= 0xdfff) {
                  v += String.fromCharCode(r, r2);
                  i += 6;
                  break;
                }
              }
              v += "\uFFFD";
            } else {
              v += String.fromCharCode(r);
            }
            break;
          }
          default:
            fail();
        }
        start = i;
        continue;
      }
      if (c >= 0xd800 && c <= 0xdfff) {
        // A pair is a valid character; a lone one an invalid byte.
        if (c <= 0xdbff && i + 1 < n && (src.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
          i += 2;
          continue;
        }
        v += src.slice(start, i) + "\uFFFD";
        i++;
        start = i;
        continue;
      }
      i++;
    }
  };
  const digits = () => {
    const s = i;
    while (i < n) {
      const c = src.charCodeAt(i);
      if (c >= 0x30 && c <= 0x39) i++;
      else break;
    }
    if (i === s) fail();
  };
  // scalar reads a string, number or literal at i.
  const scalar = (): Node => {
    const s = i;
    const c = src[i];
    if (c === '"') return str();
    if (c === "-" || (c !== undefined && c >= "0" && c <= "9")) {
      if (c === "-") i++;
      if (src[i] === "0") i++;
      else digits();
      if (src[i] === ".") {
        i++;
        digits();
      }
      if (src[i] === "e" || src[i] === "E") {
        i++;
        if (src[i] === "+" || src[i] === "-") i++;
        digits();
      }
      return { k: "num", s, e: i };
    }
    for (const lit of ["true", "false", "null"] as const) {
      if (src.startsWith(lit, i)) {
        i += lit.length;
        return { k: lit, s, e: i };
      }
    }
    return fail();
  };
  // value reads one value, its containers with a stack of their own (Go
  // allows 10000 levels, more than a JS call stack holds).
  type Open =
    | { k: "obj"; s: number; entries: [string, Node][]; key: string }
    | { k: "arr"; s: number; items: Node[] };
  const value = (): Node => {
    const stack: Open[] = [];
    for (;;) {
      ws();
      if (i >= n) fail();
      let done: Node | undefined;
      const c = src[i];
      if (c === "{" || c === "[") {
        if (stack.length + 1 > maxNestingDepth) fail();
        const s = i;
        i++;
        ws();
        if (c === "{") {
          if (src[i] === "}") {
            i++;
            done = { k: "obj", s, e: i, entries: [] };
          } else {
            if (src[i] !== '"') fail();
            const key = str().v;
            ws();
            if (src[i] !== ":") fail();
            i++;
            stack.push({ k: "obj", s, entries: [], key });
            continue;
          }
        } else if (src[i] === "]") {
          i++;
          done = { k: "arr", s, e: i, items: [] };
        } else {
          stack.push({ k: "arr", s, items: [] });
          continue;
        }
      } else {
        done = scalar();
      }
      // Add what is done to the containers it closes.
      for (;;) {
        const top = stack[stack.length - 1];
        if (!top) return done;
        if (top.k === "obj") top.entries.push([top.key, done]);
        else top.items.push(done);
        ws();
        if (src[i] === ",") {
          i++;
          if (top.k === "obj") {
            ws();
            if (src[i] !== '"') fail();
            top.key = str().v;
            ws();
            if (src[i] !== ":") fail();
            i++;
          }
          break;
        }
        if ((top.k === "obj" && src[i] === "}") || (top.k === "arr" && src[i] === "]")) {
          i++;
          stack.pop();
          done = top.k === "obj" ? { k: "obj", s: top.s, e: i, entries: top.entries } : { k: "arr", s: top.s, e: i, items: top.items };
          continue;
        }
        fail();
      }
    }
  };
  try {
    const root = value();
    ws();
    if (i !== n) return undefined;
    return { src, root };
  } catch (e) {
    if (e instanceof SyntaxErr) return undefined;
    throw e;
  }
}

function hex4(s: string, at: number): number {
  if (at + 4 > s.length) return -1;
  let r = 0;
  for (let j = at; j < at + 4; j++) {
    const c = s.charCodeAt(j);
    let d: number;
    if (c >= 0x30 && c <= 0x39) d = c - 0x30;
    else if (c >= 0x61 && c <= 0x66) d = c - 0x57;
    else if (c >= 0x41 && c <= 0x46) d = c - 0x37;
    else return -1;
    r = r * 16 + d;
  }
  return r;
}

/** valid is Go's json.Valid. */
export function valid(src: string): boolean {
  return parse(src) !== undefined;
}

/** compact is Go's json.Compact of valid JSON: no space outside strings,
 * nothing else changed. */
export function compact(src: string): string {
  let out = "";
  let start = 0;
  let inStr = false;
  for (let i = 0; i < src.length; i++) {
    const c = src.charCodeAt(i);
    if (inStr) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inStr = false;
      continue;
    }
    if (c === 0x22) inStr = true;
    else if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) {
      out += src.slice(start, i);
      start = i + 1;
    }
  }
  return start === 0 ? src : out + src.slice(start);
}

/** text is the source text of a node, as a json.RawMessage holds it. */
export function text(d: Doc, n: Node): string {
  return d.src.slice(n.s, n.e);
}

// ---- Unmarshalling into Go types -----------------------------------------

/** A Go type the decoder fills, as encoding/json does: "s" string, "b"
 * bool, "i" int/int64 (a bigint), "u" uint64 (a bigint), "r"
 * json.RawMessage (its text, or null), "t" time.Time (checked only), and
 * pointers, slices, string-keyed maps and structs of them. */
export type GoType =
  | "s"
  | "b"
  | "i"
  | "u"
  | "r"
  | "t"
  | "bytes"
  | { ptr: GoType }
  | { slice: GoType }
  | { map: GoType }
  | { struct: Record<string, GoType> };

/** struct builds a struct type; fields are named by their JSON keys. */
export function struct(fields: Record<string, GoType>): { struct: Record<string, GoType> } {
  return { struct: fields };
}
export const ptr = (t: GoType): GoType => ({ ptr: t });
export const slice = (t: GoType): GoType => ({ slice: t });
export const map = (t: GoType): GoType => ({ map: t });

/** zero is a Go type's zero value. */
export function zero(t: GoType): any {
  switch (t) {
    case "s":
      return "";
    case "b":
      return false;
    case "i":
    case "u":
      return 0n;
    case "r":
    case "t":
    case "bytes":
      return null;
  }
  if ("struct" in t) {
    const o: Record<string, any> = {};
    for (const [k, f] of Object.entries(t.struct)) o[k] = zero(f);
    return o;
  }
  return null;
}

const foldCache = new WeakMap<object, Map<string, string>>();

function fold(key: string): string {
  let out = "";
  for (const ch of key) {
    const c = ch.charCodeAt(0);
    if (c >= 0x61 && c <= 0x7a) out += String.fromCharCode(c - 32);
    else if (ch === "\u212A") out += "K";
    else if (ch === "\u017F") out += "S";
    else out += ch;
  }
  return out;
}

function fieldsByFold(t: { struct: Record<string, GoType> }): Map<string, string> {
  let m = foldCache.get(t);
  if (!m) {
    m = new Map();
    for (const k of Object.keys(t.struct)) m.set(fold(k), k);
    foldCache.set(t, m);
  }
  return m;
}

const minInt64 = -(1n << 63n);
const maxInt64 = (1n << 63n) - 1n;
const maxUint64 = (1n << 64n) - 1n;

/** parseInt64 is strconv.ParseInt(s, 10, 64) (undefined on error). */
export function parseInt64(s: string): bigint | undefined {
  if (!/^[+-]?[0-9]+$/.test(s)) return undefined;
  const v = BigInt(s);
  return v < minInt64 || v > maxInt64 ? undefined : v;
}

/** parseUint64 is strconv.ParseUint(s, 10, 64): the value, or
 * [value, error] as Go returns both (the maximum on overflow, 0 on a
 * syntax error). */
export function parseUint64(s: string): { v: bigint; ok: boolean } {
  if (!/^[0-9]+$/.test(s)) return { v: 0n, ok: false };
  const v = BigInt(s);
  return v > maxUint64 ? { v: maxUint64, ok: false } : { v, ok: true };
}

class Decoder {
  err = false;
  constructor(readonly d: Doc) {}

  // value decodes n into the holder h[k] of type t.
  into(h: any, k: string | number, t: GoType, n: Node): void {
    if (typeof t === "string") {
      this.literal(h, k, t, n);
      return;
    }
    if ("ptr" in t) {
      if (n.k === "null") {
        h[k] = null;
        return;
      }
      // A pointer is its pointee (or null): structs are references.
      if (h[k] === null || h[k] === undefined) h[k] = zero(t.ptr);
      this.into(h, k, t.ptr, n);
      return;
    }
    if ("struct" in t) {
      if (n.k === "null") return;
      if (n.k !== "obj") {
        this.err = true;
        return;
      }
      const o = h[k];
      const byFold = fieldsByFold(t);
      for (const [key, v] of n.entries) {
        const f = byFold.get(fold(key));
        if (f === undefined) continue;
        this.into(o, f, t.struct[f]!, v);
      }
      return;
    }
    if ("slice" in t) {
      if (n.k === "null") {
        h[k] = null;
        return;
      }
      if (n.k !== "arr") {
        this.err = true;
        return;
      }
      const old: any[] = h[k] ?? [];
      const a: any[] = [];
      n.items.forEach((it, i) => {
        a.push(i < old.length ? old[i] : zero(t.slice));
        this.into(a, i, t.slice, it);
      });
      h[k] = a;
      return;
    }
    // map
    if (n.k === "null") {
      h[k] = null;
      return;
    }
    if (n.k !== "obj") {
      this.err = true;
      return;
    }
    const m: Map<string, any> = h[k] ?? new Map();
    for (const [key, v] of n.entries) {
      const holder = { v: zero(t.map) };
      this.into(holder, "v", t.map, v);
      m.set(key, holder.v);
    }
    h[k] = m;
  }

  literal(h: any, k: string | number, t: "s" | "b" | "i" | "u" | "r" | "t" | "bytes", n: Node): void {
    if (t === "r") {
      h[k] = text(this.d, n);
      return;
    }
    if (t === "t") {
      if (n.k === "null") return;
      const raw = text(this.d, n);
      if (!(raw.length >= 2 && raw[0] === '"' && raw[raw.length - 1] === '"') || !rfc3339(raw.slice(1, -1))) this.err = true;
      return;
    }
    if (n.k === "null") {
      if (t === "bytes") h[k] = null;
      return;
    }
    switch (t) {
      case "s":
        if (n.k === "str") h[k] = n.v;
        else this.err = true;
        return;
      case "bytes":
        if (n.k === "str") {
          const b = base64Decode(n.v);
          if (b === undefined) this.err = true;
          else h[k] = b;
        } else this.err = true;
        return;
      case "b":
        if (n.k === "true" || n.k === "false") h[k] = n.k === "true";
        else this.err = true;
        return;
      case "i": {
        const v = n.k === "num" ? parseInt64(text(this.d, n)) : undefined;
        if (v === undefined) this.err = true;
        else h[k] = v;
        return;
      }
      case "u": {
        const r = n.k === "num" ? parseUint64(text(this.d, n)) : { v: 0n, ok: false };
        if (!r.ok) this.err = true;
        else h[k] = r.v;
        return;
      }
    }
  }
}

/** unmarshalDoc decodes a parsed document into a fresh value of type t
 * as Go's json.Unmarshal does: what fits is filled even when something
 * does not, and ok says whether all did. */
export function unmarshalDoc<T = any>(d: Doc, t: GoType): { v: T; ok: boolean } {
  const dec = new Decoder(d);
  const h = { v: zero(t) };
  dec.into(h, "v", t, d.root);
  return { v: h.v, ok: !dec.err };
}

/** unmarshal is json.Unmarshal(src, &v) into a fresh v of type t; ok is
 * false, as Go's error, for invalid JSON (v then zero) or a type that
 * does not fit. */
export function unmarshal<T = any>(src: string, t: GoType): { v: T; ok: boolean } {
  const d = parse(src);
  if (!d) return { v: zero(t), ok: false };
  return unmarshalDoc<T>(d, t);
}

/** rfc3339 checks a time as time.Time's UnmarshalJSON reads it: its
 * strict RFC 3339, or what time.Parse(time.RFC3339, s) takes when that
 * fails (a one-digit hour, a comma before the fraction, a zone's hour up
 * to 24 and minute up to 60). */
function rfc3339(s: string): boolean {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{1,2}):(\d{2}):(\d{2})([.,]\d+)?(Z|[+-](\d{2}):(\d{2}))$/.exec(s);
  if (!m) return false;
  const year = +m[1]!;
  const month = +m[2]!;
  const day = +m[3]!;
  if (month < 1 || month > 12) return false;
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  const days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]!;
  if (day < 1 || day > days || +m[4]! > 23 || +m[5]! > 59 || +m[6]! > 59) return false;
  if (m[8] !== "Z" && (+m[9]! > 24 || +m[10]! > 60)) return false;
  return true;
}

// ---- Marshalling ---------------------------------------------------------

const hexDigits = "0123456789abcdef";

/** quote is a string as Go's json.Marshal writes it (HTML escaped). */
export function quote(s: string): string {
  let out = '"';
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    let esc: string | undefined;
    if (c < 0x80) {
      if (c >= 0x20 && c !== 0x22 && c !== 0x5c && c !== 0x3c && c !== 0x3e && c !== 0x26) continue;
      switch (c) {
        case 0x22: esc = '\\"'; break;
        case 0x5c: esc = "\\\\"; break;
        case 0x08: esc = "\\b"; break;
        case 0x0c: esc = "\\f"; break;
        case 0x0a: esc = "\\n"; break;
        case 0x0d: esc = "\\r"; break;
        case 0x09: esc = "\\t"; break;
        default: esc = "\\u00" + hexDigits[c >> 4] + hexDigits[c & 0xf];
      }
    } else if (c === 0x2028 || c === 0x2029) {
      esc = c === 0x2028 ? "\\u2028" : "\\u2029";
    } else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      i++;
      continue;
    } else if (c >= 0xd800 && c <= 0xdfff) {
      esc = "\\ufffd";
    } else {
      continue;
    }
    out += s.slice(start, i) + esc;
    start = i + 1;
  }
  return out + s.slice(start) + '"';
}

/** rawOut is a json.RawMessage as json.Marshal writes it: compacted, with
 * <, >, &, U+2028 and U+2029 escaped (its strings otherwise verbatim). */
export function rawOut(r: string): string {
  const c = compact(r);
  return /[<>&\u2028\u2029]/.test(c)
    ? c.replace(/[<>&\u2028\u2029]/g, (ch) => "\\u" + ch.charCodeAt(0).toString(16).padStart(4, "0"))
    : c;
}

/** obj writes a JSON object of the pairs whose value is not undefined;
 * values are JSON already. */
export function obj(pairs: [string, string | undefined][]): string {
  let out = "{";
  for (const [k, v] of pairs) {
    if (v === undefined) continue;
    if (out.length > 1) out += ",";
    out += quote(k) + ":" + v;
  }
  return out + "}";
}

/** The omitempty helpers: undefined for Go's empty value. */
export const omitStr = (s: string | undefined): string | undefined => (s ? quote(s) : undefined);
export const omitRaw = (r: string | null | undefined): string | undefined => (r ? rawOut(r) : undefined);
export const omitInt = (n: bigint | number | undefined): string | undefined =>
  n === undefined || n === 0 || n === 0n ? undefined : String(n);
export const omitBool = (b: boolean | undefined): string | undefined => (b ? "true" : undefined);

/** strMap is a map[string]string as Go marshals it: keys sorted. */
export function strMap(m: Record<string, string>): string {
  return obj(
    Object.keys(m)
      .sort(byteOrder)
      .map((k) => [k, quote(m[k]!)]),
  );
}

/** byteOrder compares strings as Go's sort.Strings does (by UTF-8 bytes). */
export function byteOrder(a: string, b: string): number {
  if (a === b) return 0;
  const x = goBytes(a);
  const y = goBytes(b);
  const n = Math.min(x.length, y.length);
  for (let i = 0; i < n; i++) if (x[i] !== y[i]) return x[i]! - y[i]!;
  return x.length - y.length;
}

// ---- base64 ([]byte fields) ------------------------------------------------

const b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

export function base64Encode(b: Uint8Array): string {
  const parts: string[] = [];
  let cur = "";
  let i = 0;
  for (; i + 2 < b.length; i += 3) {
    const v = (b[i]! << 16) | (b[i + 1]! << 8) | b[i + 2]!;
    cur += b64[v >> 18]! + b64[(v >> 12) & 63]! + b64[(v >> 6) & 63]! + b64[v & 63]!;
    if (cur.length >= 1 << 16) {
      parts.push(cur);
      cur = "";
    }
  }
  if (i < b.length) {
    const v = (b[i]! << 16) | ((i + 1 < b.length ? b[i + 1]! : 0) << 8);
    cur += b64[v >> 18]! + b64[(v >> 12) & 63]! + (i + 1 < b.length ? b64[(v >> 6) & 63]! : "=") + "=";
  }
  parts.push(cur);
  return parts.join("");
}

/** base64Decode is base64.StdEncoding.Decode, as Go's json decodes a
 * []byte (line breaks ignored); undefined when it is not base64. */
export function base64Decode(s: string): Uint8Array | undefined {
  s = s.replace(/[\r\n]/g, "");
  if (s.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(s)) return undefined;
  const pad = s.endsWith("==") ? 2 : s.endsWith("=") ? 1 : 0;
  const out = new Uint8Array((s.length / 4) * 3 - pad);
  let o = 0;
  for (let i = 0; i < s.length; i += 4) {
    const v =
      (b64.indexOf(s[i]!) << 18) |
      (b64.indexOf(s[i + 1]!) << 12) |
      ((s[i + 2] === "=" ? 0 : b64.indexOf(s[i + 2]!)) << 6) |
      (s[i + 3] === "=" ? 0 : b64.indexOf(s[i + 3]!));
    out[o++] = v >> 16;
    if (o < out.length) out[o++] = (v >> 8) & 255;
    if (o < out.length) out[o++] = v & 255;
  }
  return out;
}
