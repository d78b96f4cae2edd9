// Watching a run (docs/protocol.md, Watching a run; Go: client/watch.go):
// subscribe to the run's live subjects first, page the history through the
// workers' read relay, then take the live messages, each message exactly
// once, in stream order, joining chunked lines.

import type { Msg, MsgHdrs, NatsConnection, Subscription } from "@nats-io/nats-core";
import { BrokenChunkError, NoWorkerError, RelayError } from "./errors.js";
import type { Names } from "./names.js";
import { Queue, TIMEOUT } from "./queue.js";
import { header, pages, storedOf, type RelayConn, type Stored } from "./relay.js";
import { isTerminal, type Egress, type Status, type ToolMessage } from "./types.js";

const decoder = new TextDecoder();

/**
 * One message of a run's chain as a watcher sees it: an agent JSON line
 * (kind "events"), a raw line ("raw"), an input ("input"), a connection
 * the sandbox's egress proxy decided ("egress", decoded in `egress`), a
 * host tool call or its answer ("tool", decoded in `tool`) or a status
 * ("status"). A line that was published in chunks arrives as one RunEvent
 * (named so as not to be the DOM's Event).
 */
export class RunEvent {
  constructor(
    /** The subject's last token: events, raw, status, input, egress or tool. */
    readonly kind: string,
    /** The payload unchanged: the line's bytes, or the status JSON. */
    readonly data: Uint8Array,
    /** The journal offset of Baton-Offset, or -1 when absent or unreadable. */
    readonly offset: number,
    /** The stream sequence (of the last chunk of a chunked line); fromSeq: seq + 1 resumes after it. */
    readonly seq: number,
    /** The decoded status when kind is "status". */
    readonly status?: Status,
    /** On an input: the agent's stdin was closed after it. */
    readonly eof = false,
    /** On an input: it is an interrupt. */
    readonly interrupt = false,
    /** On an input: its sequence in the input stream (0 if none). */
    readonly inputSeq = 0,
    /** The decoded connection when kind is "egress"; undefined if the body is not one. */
    readonly egress?: Egress,
    /** The decoded call or answer when kind is "tool"; undefined if the body is not one. */
    readonly tool?: ToolMessage,
    /** On an input: its Baton-Input-Kind ("interrupt", "decision": baton's answer to a
     * permission prompt, "followup": its turn after a late allow), or "". */
    readonly inputKind = "",
    /** The approval id (Baton-Approval) on a permission prompt's line (kind "events") of a
     * run whose profile has a policy, and on baton's decision and follow-up inputs; "" else. */
    readonly approval = "",
    /** On such a prompt line: the policy's verdict, "allow", "ask" or "deny" (Baton-Verdict). */
    readonly verdict = "",
    /** The policy's rule that matched (Baton-Rule), on a prompt line and a policy's decision. */
    readonly rule = "",
    /** On a decision or follow-up input: who decided, "policy", "timeout" (a hold) or a
     * person's name (Baton-Decided-By). */
    readonly decidedBy = "",
  ) {}

  /** The payload as UTF-8 text. */
  get text(): string {
    return decoder.decode(this.data);
  }
}

export interface WatchOptions {
  /** Start at this stream sequence instead of the chain's start: the seq of the last event handled, plus one. */
  fromSeq?: number;
  /** Told false when no worker answers the history reads, true when one does again. */
  onWorkers?: (answering: boolean) => void;
  /** Ends the watch (it then throws an AbortedError). */
  signal?: AbortSignal;
}

/** DefaultMaxLineBytes bounds a reassembled line (Go: client.DefaultMaxLineBytes). */
export const DEFAULT_MAX_LINE_BYTES = 64 << 20;

// Timings of Go's watcher.
const LIVE_BUFFER = 4096;
const IDLE_PAGE_MS = 5000;
const GAP_RETRY_MS = 200;
const ABSENT_RETRY_MS = 1000;

interface Part {
  subject: string;
  seq: number;
  headers: MsgHdrs | undefined;
  data: Uint8Array;
}

/**
 * A watch of one run, as an async iterator of its events; it ends after
 * the terminal status, which is then in `result`. Break out of a
 * for-await loop (or call return()) to stop it early.
 */
export class RunWatch implements AsyncIterableIterator<RunEvent> {
  /** The terminal status, once the iterator is done. */
  result: Status | undefined;
  private ready: RunEvent[] = [];
  private readyHead = 0;
  private last = 0;
  private gap = false;
  private absent = false;
  private started = false;
  private closed = false;
  private live = new Queue<Msg>();
  private sub: Subscription | null = null;
  private asm: Assembler;
  private filter: string;

  constructor(
    private nc: NatsConnection,
    private rc: RelayConn,
    private names: Names,
    private runId: string,
    maxLine: number,
    private opts: WatchOptions = {},
  ) {
    this.asm = new Assembler(maxLine);
    this.filter = names.runFilter(runId);
    if (opts.fromSeq && opts.fromSeq > 0) this.last = opts.fromSeq - 1;
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<RunEvent> {
    return this;
  }

  async next(): Promise<IteratorResult<RunEvent>> {
    try {
      if (!this.started) await this.start();
      while (this.readyHead === this.ready.length) {
        if (this.result || this.closed) {
          this.close();
          return { value: undefined, done: true };
        }
        await this.step();
      }
      const ev = this.ready[this.readyHead++];
      if (this.readyHead === this.ready.length) {
        this.ready = [];
        this.readyHead = 0;
      }
      return { value: ev, done: false };
    } catch (e) {
      this.close();
      throw e;
    }
  }

  async return(): Promise<IteratorResult<RunEvent>> {
    this.close();
    return { value: undefined, done: true };
  }

  private close(): void {
    this.closed = true;
    if (this.sub) {
      this.sub.unsubscribe();
      this.sub = null;
    }
  }

  private async start(): Promise<void> {
    this.started = true;
    // The subscription is in place before the first page is asked for, so
    // nothing stored after the page is missed live.
    this.sub = this.nc.subscribe(this.filter, {
      callback: (err, m) => {
        // Past the buffer a message is dropped: a page recovers it.
        if (!err && this.live.length < LIVE_BUFFER) this.live.push(m);
      },
    });
    await this.nc.flush();
    // A watch begun before any worker answers waits for one, as it waits
    // for the run's events.
    await this.guard(() => this.catchUp());
  }

  /** One turn of the loop: a live message, or a page after a while without one. */
  private async step(): Promise<void> {
    const m = await this.live.next(this.idle(), this.rc.signal);
    await this.guard(() => (m === TIMEOUT ? this.catchUp() : this.onLive(m)));
  }

  /** guard runs a read; no relay answering only means paging again later. */
  private async guard(read: () => Promise<void>): Promise<void> {
    try {
      await read();
    } catch (e) {
      if (e instanceof NoWorkerError) {
        this.setAbsent(true);
        return;
      }
      throw e;
    }
    this.setAbsent(false);
  }

  private setAbsent(absent: boolean): void {
    if (absent !== this.absent && this.opts.onWorkers) this.opts.onWorkers(!absent);
    this.absent = absent;
  }

  private idle(): number {
    if (this.absent) return ABSENT_RETRY_MS;
    if (this.gap) return GAP_RETRY_MS;
    return IDLE_PAGE_MS;
  }

  /** catchUp pages the chain from last+1 until the relay has nothing more. */
  private async catchUp(): Promise<void> {
    this.gap = false;
    await pages(this.rc, this.names.readEventsSubject(this.runId), this.last + 1, "", (s: Stored) => {
      if (this.result || s.seq <= this.last) return;
      this.add({ subject: s.subject, seq: s.seq, headers: s.headers, data: s.data });
    });
  }

  /**
   * onLive handles a republished message: its previous sequence on the
   * chain is the publisher's fence when it carries one for the run's
   * filter, else seq-1. Already handled: skipped. Previous at or below the
   * last handled: handed on. Else a message between was not seen live:
   * page from last+1.
   */
  private async onLive(m: Msg): Promise<void> {
    if (this.result) return;
    const s = storedOf(m);
    if (!s || s.stream !== this.names.eventsStream()) return; // not the stream's republish
    s.subject = m.subject;
    if (s.seq <= this.last) return;
    if (prevSeq(this.filter, s) <= this.last) {
      this.add({ subject: s.subject, seq: s.seq, headers: s.headers, data: s.data });
      return;
    }
    await this.catchUp();
    this.gap = s.seq > this.last && !this.result;
  }

  private add(p: Part): void {
    this.last = p.seq;
    const ev = this.asm.add(p);
    if (!ev) return;
    this.ready.push(ev);
    if (ev.status && isTerminal(ev.status.status)) this.result = ev.status;
  }
}

function prevSeq(filter: string, s: Stored): number {
  if (header(s.headers, "Nats-Expected-Last-Subject-Sequence-Subject") === filter) {
    const t = header(s.headers, "Nats-Expected-Last-Subject-Sequence");
    if (/^[0-9]+$/.test(t)) {
      const p = Number(t);
      if (p < s.seq) return p;
    }
  }
  return s.seq - 1;
}

/**
 * Assembler turns a run's messages into Events, joining the pieces of
 * chunked lines; the pieces of a line are consecutive on the chain, so
 * anything else in between is an error. After an error it is spent.
 */
export class Assembler {
  private pending: { subject: string; n: number; next: number; pieces: Uint8Array[]; size: number; firstSeq: number } | null = null;
  constructor(private maxLine: number) {}

  add(p: Part): RunEvent | null {
    const h = header(p.headers, "Baton-Chunk");
    const pl = this.pending;
    if (pl && (h === "" || p.subject !== pl.subject)) {
      throw new BrokenChunkError(
        `baton: broken chunked line: line started at seq ${pl.firstSeq} has ${pl.next - 1} of ${pl.n} pieces, then seq ${p.seq} is not its piece ${pl.next}`);
    }
    if (h === "") return newEvent(p, p.data);
    const [i, n] = parseChunk(h, p.seq);
    let cur = pl;
    if (!cur) {
      if (i !== 1) {
        throw new BrokenChunkError(`baton: broken chunked line: seq ${p.seq} is piece ${i}/${n} of a line whose first piece is missing`);
      }
      if (n === 1) return newEvent(p, p.data);
      cur = { subject: p.subject, n, next: 1, pieces: [], size: 0, firstSeq: p.seq };
      this.pending = cur;
    }
    if (i !== cur.next || n !== cur.n) {
      throw new BrokenChunkError(
        `baton: broken chunked line: line started at seq ${cur.firstSeq} expected piece ${cur.next}/${cur.n}, seq ${p.seq} is ${i}/${n}`);
    }
    if (cur.size + p.data.length > this.maxLine) {
      throw new BrokenChunkError(`baton: broken chunked line: line started at seq ${cur.firstSeq} is larger than ${this.maxLine} bytes`);
    }
    cur.pieces.push(p.data);
    cur.size += p.data.length;
    cur.next++;
    if (i < n) return null;
    this.pending = null;
    const line = new Uint8Array(cur.size);
    let at = 0;
    for (const piece of cur.pieces) {
      line.set(piece, at);
      at += piece.length;
    }
    return newEvent(p, line);
  }
}

function parseChunk(h: string, seq: number): [number, number] {
  const m = /^([0-9]+)\/([0-9]+)$/.exec(h);
  const i = m ? Number(m[1]) : 0, n = m ? Number(m[2]) : 0;
  if (!m || i < 1 || n < 1 || i > n || !Number.isSafeInteger(n)) {
    throw new BrokenChunkError(`baton: broken chunked line: seq ${seq}: bad Baton-Chunk header ${JSON.stringify(h)}: want i/n with 1 <= i <= n`);
  }
  return [i, n];
}

function newEvent(p: Part, data: Uint8Array): RunEvent {
  const kind = p.subject.slice(p.subject.lastIndexOf(".") + 1);
  const offText = header(p.headers, "Baton-Offset");
  const offset = /^[0-9]+$/.test(offText) ? Number(offText) : -1;
  let status: Status | undefined;
  if (kind === "status") {
    try {
      status = JSON.parse(decoder.decode(data)) as Status;
    } catch (e) {
      throw new RelayError(`baton: status message at seq ${p.seq} is not a status: ${(e as Error).message}`);
    }
    if (!status || typeof status.status !== "string") {
      throw new RelayError(`baton: status message at seq ${p.seq} is not a status`);
    }
  }
  if (kind === "input") {
    const seqText = header(p.headers, "Baton-Input-Seq");
    const inputKind = header(p.headers, "Baton-Input-Kind");
    return new RunEvent(kind, data, offset, p.seq, undefined,
      header(p.headers, "Baton-Input-EOF") === "true",
      inputKind === "interrupt",
      /^[0-9]+$/.test(seqText) ? Number(seqText) : 0,
      undefined, undefined, inputKind,
      header(p.headers, "Baton-Approval"), "", header(p.headers, "Baton-Rule"), header(p.headers, "Baton-Decided-By"));
  }
  if (kind === "events" && header(p.headers, "Baton-Approval") !== "") {
    return new RunEvent(kind, data, offset, p.seq, undefined, false, false, 0, undefined, undefined, "",
      header(p.headers, "Baton-Approval"), header(p.headers, "Baton-Verdict"), header(p.headers, "Baton-Rule"));
  }
  if (kind === "egress") {
    const e = decodeObject(data);
    return new RunEvent(kind, data, offset, p.seq, undefined, false, false, 0, e && typeof e.allowed === "boolean" ? (e as unknown as Egress) : undefined);
  }
  if (kind === "tool") {
    const m = decodeObject(data);
    const tool = m && typeof m.call === "number" && typeof m.phase === "string" && typeof m.name === "string" ? (m as unknown as ToolMessage) : undefined;
    return new RunEvent(kind, data, offset, p.seq, undefined, false, false, 0, undefined, tool);
  }
  return new RunEvent(kind, data, offset, p.seq, status);
}

/**
 * decodeObject is data's JSON object, or null if it is none: a message
 * another publisher put on the chain passes undecoded, as in Go.
 */
function decodeObject(data: Uint8Array): Record<string, unknown> | null {
  try {
    const v: unknown = JSON.parse(decoder.decode(data));
    return v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}
