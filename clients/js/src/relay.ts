// Reads through the workers' read relay (docs/protocol.md, Reading through
// the relay; Go: client/read.go): a request on a relay subject with a fresh
// inbox of the connection as its reply, answered there by the server's
// direct get: the stored messages, then a "204 EOB" or "404" status.

import { createInbox, type Msg, type MsgHdrs, type NatsConnection } from "@nats-io/nats-core";
import { NoWorkerError, RelayError } from "./errors.js";
import { Queue, TIMEOUT } from "./queue.js";

/** One stored message a relay page delivered. */
export interface Stored {
  stream: string;
  subject: string;
  seq: number;
  /** Nats-Time-Stamp, as the server wrote it ("" when absent). */
  time: string;
  headers: MsgHdrs;
  data: Uint8Array;
}

export interface ReadRequest {
  from?: number;
  max?: number;
  name?: string;
}

/** Bounds of one page: at most this many messages (protocol.MaxReadMax). */
export const MAX_READ_MAX = 1024;

export interface RelayConn {
  nc: NatsConnection;
  inboxPrefix: string;
  /** How long each message of a page may take (Go: DefaultReadTimeout). */
  readTimeoutMs: number;
  signal?: AbortSignal;
}

const encoder = new TextEncoder();

export function header(h: MsgHdrs | undefined, k: string): string {
  return h ? h.get(k) : "";
}

/** storedOf reads the direct get headers of m; null when m is not a stored message. */
export function storedOf(m: Msg): Stored | null {
  const h = m.headers;
  if (!h) return null;
  const seqText = h.get("Nats-Sequence");
  const subject = h.get("Nats-Subject");
  if (!/^[0-9]+$/.test(seqText) || subject === "") return null;
  const seq = Number(seqText);
  if (seq === 0) return null;
  return { stream: h.get("Nats-Stream"), subject, seq, time: h.get("Nats-Time-Stamp"), headers: h, data: m.data };
}

/**
 * page sends one relay request and hands each stored message of its answer
 * to fn, in stream order. It returns how many matching messages are stored
 * past the page (the EOB's Nats-Num-Pending): 0 when the page reached the
 * end, or when nothing matched (404). A single get is answered by one
 * message and no EOB.
 */
export async function page(
  rc: RelayConn, subject: string, req: ReadRequest, single: boolean,
  fn: (s: Stored) => void | Promise<void>,
): Promise<number> {
  const inbox = createInbox(rc.inboxPrefix);
  const q = new Queue<Msg | Error>();
  const sub = rc.nc.subscribe(inbox, {
    callback: (err, m) => q.push(err ?? m),
  });
  try {
    const body: ReadRequest = {};
    if (req.from) body.from = req.from;
    if (req.max) body.max = req.max;
    if (req.name) body.name = req.name;
    rc.nc.publish(subject, Object.keys(body).length ? encoder.encode(JSON.stringify(body)) : undefined, { reply: inbox });
    for (;;) {
      const m = await q.next(rc.readTimeoutMs, rc.signal);
      if (m === TIMEOUT) {
        throw new NoWorkerError(
          `baton: read relay: no answer on ${subject} within ${rc.readTimeoutMs} ms (is a \`baton worker\` running?)`);
      }
      if (m instanceof Error) {
        throw new RelayError(`baton: read relay: ${subject}: ${m.message}`, "", { cause: m });
      }
      const h = m.headers;
      const code = header(h, "Nats-Service-Error-Code");
      if (code !== "") {
        throw new RelayError(`baton: read relay: ${subject} refused (${code}): ${header(h, "Nats-Service-Error")}`, code);
      }
      if (m.data.length === 0 && h && h.code > 0) {
        switch (h.code) {
          case 204: { // EOB
            const n = Number(h.get("Nats-Num-Pending") || "0");
            return Number.isFinite(n) ? n : 0;
          }
          case 404:
            return 0;
          case 503:
            throw new NoWorkerError(`baton: read relay: nobody listens on ${subject} (is a \`baton worker\` running?)`);
          default:
            throw new RelayError(`baton: read relay: ${subject}: status ${h.status}`);
        }
      }
      const s = storedOf(m);
      if (!s) {
        throw new RelayError(`baton: read relay: ${subject}: answer without a stream sequence`);
      }
      await fn(s);
      if (single) return 0;
    }
  } finally {
    sub.unsubscribe();
  }
}

/** get reads the one message of a single-message relay endpoint; null when there is none. */
export async function get(rc: RelayConn, subject: string, name = ""): Promise<Stored | null> {
  let out: Stored | null = null;
  await page(rc, subject, { name }, true, (s) => {
    out = s;
  });
  return out;
}

/** pages reads every page of subject from sequence from on, handing each stored message to fn. */
export async function pages(
  rc: RelayConn, subject: string, from: number, name: string,
  fn: (s: Stored) => void | Promise<void>,
): Promise<void> {
  for (;;) {
    let last = from - 1;
    const pending = await page(rc, subject, { from, max: MAX_READ_MAX, name }, false, async (s) => {
      last = s.seq;
      await fn(s);
    });
    if (pending === 0) return;
    if (last < from) {
      throw new RelayError(`baton: read relay: ${subject}: a page from ${from} with ${pending} pending held nothing`);
    }
    from = last + 1;
  }
}

/** Reports whether a KV or object message marks its key gone. */
export function isDeleted(h: MsgHdrs): boolean {
  const op = h.get("KV-Operation");
  return op === "DEL" || op === "PURGE";
}
