import { ptr, struct, unmarshal } from "./json.js";

/** The NDJSON an agent prints on its chain's events subject (a
 * profile's `events`); "" sniffs it from the lines. */
export type Dialect = "" | "claude" | "codex-exec" | "codex-app-server" | "raw";

export const DialectClaude = "claude";
export const DialectCodexExec = "codex-exec";
export const DialectCodexAppServer = "codex-app-server";
export const DialectRaw = "raw";

/** Every dialect, for messages and documentation. */
export const Dialects: readonly Dialect[] = [DialectClaude, DialectCodexExec, DialectCodexAppServer, DialectRaw];

/** The error parseDialect throws for a name that is no dialect. */
export class UnknownDialectError extends Error {
  constructor(s: string) {
    super(`unknown dialect ${JSON.stringify(s)} (one of ${Dialects.join(", ")})`);
    this.name = "UnknownDialectError";
  }
}

/** validDialect reports whether s is a dialect, or "" (sniff). */
export function validDialect(s: string): s is Dialect {
  return s === "" || (Dialects as readonly string[]).includes(s);
}

/** parseDialect reads a dialect's name; "" is the sniffing one. It throws
 * UnknownDialectError. */
export function parseDialect(s: string): Dialect {
  if (validDialect(s)) return s;
  throw new UnknownDialectError(s);
}

const claudeTypes = new Set([
  "system",
  "assistant",
  "user",
  "result",
  "stream_event",
  "control_request",
  "control_response",
  "control_cancel_request",
]);

const sniffLine = struct({ type: ptr("s"), method: ptr("s"), id: "r", result: "r", error: "r" });

/** sniff names the dialect of an events line, or "" when it does not
 * tell (see the Go package's sniff). */
export function sniff(line: string): Dialect {
  const { v: o, ok } = unmarshal(line, sniffLine);
  if (!ok) return "";
  const t: string | null = o.type;
  if (t !== null && claudeTypes.has(t)) return DialectClaude;
  if (t !== null && (t.startsWith("thread.") || t.startsWith("turn.") || t.startsWith("item."))) return DialectCodexExec;
  if (t === null && (o.method !== null || (o.id !== null && (o.result !== null || o.error !== null)))) return DialectCodexAppServer;
  return "";
}
