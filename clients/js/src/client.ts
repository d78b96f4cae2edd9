// The baton client (Go: client.Client): submit, watch, send, interrupt,
// cancel, records, outputs and workspaces, over a NatsConnection the
// caller connected (TCP in Node, WebSocket in a browser).

import { errors as natsErrors, headers, type Msg, type MsgHdrs, type NatsConnection } from "@nats-io/nats-core";
import {
  BatonError, DigestError, JetStreamError, DuplicateError, InvalidError, NoInputError, NoWorkerError, NotEndedError,
  NotFoundError, RefusedError, RelayError, SessionExistsError, SessionLiveError, TerminalError, TooLargeError,
} from "./errors.js";
import { decodeMsgpack } from "./msgpack.js";
import { Names, validRunId } from "./names.js";
import { get, isDeleted, page, pages, type RelayConn, type Stored } from "./relay.js";
import {
  isTerminal, type CancelReply, type InputReply, type Job, type Output, type RunRecord, type SessionRecord,
  type SessionSendReply, type Status,
} from "./types.js";
import { DEFAULT_MAX_LINE_BYTES, RunWatch, type RunEvent, type WatchOptions } from "./watch.js";
import { putWorkspace, type PutWorkspaceOptions } from "./workspace.js";

/** Bounds a request to the workers (cancel, input, interrupt) (Go: DefaultCancelTimeout). */
export const DEFAULT_REQUEST_TIMEOUT_MS = 10_000;
/** Bounds the wait for each message of a relay page (Go: DefaultReadTimeout). */
export const DEFAULT_READ_TIMEOUT_MS = 10_000;

export interface ClientOptions {
  /** The deployment's prefix (default "baton"). */
  prefix?: string;
  /**
   * The connection's inbox prefix: "_INBOX" (the default) for a client, or
   * "_INBOX_run.<runId>" for a run token's connection. Read from the
   * connection's own options when not given.
   */
  inboxPrefix?: string;
  /** Bounds a line reassembled from chunks (default 64 MiB). */
  maxLineBytes?: number;
  /** Bounds each message of a relay read (default 10 s). */
  readTimeoutMs?: number;
  /** Bounds a request to the workers (default 10 s). */
  requestTimeoutMs?: number;
}

export interface SubmitOptions {
  /** The job's Nats-Msg-Id (default: its runId), so a retried submit is deduplicated. */
  msgId?: string;
  /** Make the run a turn of this session (the job's session field). */
  session?: string;
}

export interface SendOptions {
  /** Close the agent's stdin once this message (which may be empty) is written. */
  eof?: boolean;
  /** Make the send idempotent within the input stream's duplicates window. */
  msgId?: string;
}

/** What a run's capture stored, as its terminal status lists it. */
export interface RunOutputs {
  runId: string;
  status: string;
  outputs: Output[];
  error?: string;
  notes?: string[];
}

/** A signal for one call. */
export interface CallOptions {
  signal?: AbortSignal;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function toBytes(data: Uint8Array | string): Uint8Array {
  return typeof data === "string" ? encoder.encode(data) : data;
}

function checkRunId(runId: string): void {
  if (!validRunId(runId)) {
    throw new InvalidError(`baton: bad runId ${JSON.stringify(runId)}: must match [A-Za-z0-9_-]{1,128}`);
  }
}

function checkSessionId(id: string): void {
  if (!validRunId(id)) {
    throw new InvalidError(`baton: invalid job: session ${JSON.stringify(id)} must match [A-Za-z0-9_-]{1,128}`);
  }
}

/** The connection's own inbox prefix (nats.js keeps it in its options). */
function connInboxPrefix(nc: NatsConnection): string {
  const o = (nc as unknown as { options?: { inboxPrefix?: string } }).options;
  return o?.inboxPrefix || "_INBOX";
}

/**
 * streamJSONUserMessage wraps text as one user message of Claude Code's
 * `--input-format stream-json`: the line to send to such an agent (Go:
 * client.StreamJSONUserMessage).
 */
export function streamJSONUserMessage(text: string): string {
  return JSON.stringify({ message: { content: text, role: "user" }, parent_tool_use_id: null, session_id: "default", type: "user" });
}

/** A client of one baton deployment over a connected NatsConnection. */
export class BatonClient {
  readonly nc: NatsConnection;
  readonly names: Names;
  readonly inboxPrefix: string;
  private maxLine: number;
  private readTimeoutMs: number;
  private requestTimeoutMs: number;

  constructor(nc: NatsConnection, opts: ClientOptions = {}) {
    this.nc = nc;
    this.names = new Names(opts.prefix ?? "baton");
    this.inboxPrefix = opts.inboxPrefix ?? connInboxPrefix(nc);
    for (const [k, v] of Object.entries({ maxLineBytes: opts.maxLineBytes, readTimeoutMs: opts.readTimeoutMs, requestTimeoutMs: opts.requestTimeoutMs })) {
      if (v !== undefined && !(Number.isSafeInteger(v) && v > 0)) {
        throw new InvalidError(`baton: invalid option: ${k} ${v} must be a positive integer`);
      }
    }
    this.maxLine = opts.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
    this.readTimeoutMs = opts.readTimeoutMs ?? DEFAULT_READ_TIMEOUT_MS;
    this.requestTimeoutMs = opts.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  }

  /** @internal */
  relay(signal?: AbortSignal): RelayConn {
    return { nc: this.nc, inboxPrefix: this.inboxPrefix, readTimeoutMs: this.readTimeoutMs, signal };
  }

  /**
   * submit publishes job on the run-job subject (a session's job: on its
   * session's) with Nats-Msg-Id set to its runId (or msgId) and waits for
   * the stream's ack. A job with a bad runId, no profile or a bad session
   * id is not sent (InvalidError). If the stream already held a job with
   * that id, it throws a DuplicateError: the run was submitted before, and
   * no second run will start.
   */
  async submit(job: Job, opts: SubmitOptions = {}): Promise<{ stream: string; seq: number }> {
    const j: Job = { ...job };
    if (opts.session) j.session = opts.session;
    checkRunId(j.runId);
    if (!j.profile) throw new InvalidError(`baton: invalid job ${j.runId}: profile is required`);
    if (j.session !== undefined) checkSessionId(j.session);
    const subject = j.session ? this.names.sessionJobSubject(j.session) : this.names.runJobSubject();
    const h = headers();
    h.set("Nats-Msg-Id", opts.msgId ?? j.runId);
    h.set("Nats-Expected-Stream", this.names.jobsStream());
    const ack = await this.jsPublish(subject, encoder.encode(JSON.stringify(j)), h, `submit ${j.runId}`, this.names.jobsStream());
    if (ack.duplicate) {
      throw new DuplicateError(`baton: job already submitted: run ${j.runId} (stream ${ack.stream} seq ${ack.seq})`, ack.stream, ack.seq);
    }
    return { stream: ack.stream, seq: ack.seq };
  }

  /** @internal A JetStream publish as a core request whose reply is the stream's ack. */
  async jsPublish(subject: string, data: Uint8Array, h: MsgHdrs, what: string, stream: string, timeoutMs = this.requestTimeoutMs): Promise<PubAck> {
    let m: Msg;
    try {
      m = await this.nc.request(subject, data, { headers: h, timeout: timeoutMs });
    } catch (e) {
      if (isNoResponders(e)) {
        throw new JetStreamError(`baton: ${what}: no stream answered on ${subject} (is ${stream} provisioned? a \`baton worker\` creates it on start)`, 503, 0, "no responders", e);
      }
      if (e instanceof natsErrors.TimeoutError) {
        throw new JetStreamError(`baton: ${what}: no answer from ${stream} within ${timeoutMs} ms`, 408, 0, "timeout", e);
      }
      throw e;
    }
    let ack: { stream?: string; seq?: number; duplicate?: boolean; error?: { code?: number; err_code?: number; description?: string } };
    try {
      ack = JSON.parse(decoder.decode(m.data));
    } catch {
      throw new JetStreamError(`baton: ${what}: unreadable answer ${JSON.stringify(decoder.decode(m.data))}`, 0, 0, "");
    }
    if (ack.error) {
      const { code = 0, err_code = 0, description = "" } = ack.error;
      throw new JetStreamError(`baton: ${what}: ${description} (${err_code})`, code, err_code, description);
    }
    return { stream: ack.stream ?? "", seq: ack.seq ?? 0, duplicate: ack.duplicate === true };
  }

  /**
   * watch replays the chain of runId from its start (or opts.fromSeq),
   * then follows it live, calling onEvent for each event, raw line, input
   * and status in chain order, each once; an async onEvent is awaited. It
   * returns the run's terminal status once onEvent has handled it. It
   * throws onEvent's error unchanged, an AbortedError when opts.signal
   * aborts, and a BrokenChunkError if a chunked line cannot be put back
   * together. A run that has not started yet has an empty chain: watch
   * waits for it, and through times no worker answers (opts.onWorkers).
   */
  async watch(runId: string, onEvent: (ev: RunEvent) => void | Promise<void>, opts: WatchOptions = {}): Promise<Status> {
    const w = this.events(runId, opts);
    try {
      for await (const ev of w) {
        await onEvent(ev);
      }
    } finally {
      await w.return();
    }
    return w.result as Status;
  }

  /**
   * events is watch as an async iterator: `for await (const ev of
   * client.events(runId))`. It ends after the terminal status (also its
   * `result`); breaking out of the loop ends the watch.
   */
  events(runId: string, opts: WatchOptions = {}): RunWatch {
    checkRunId(runId);
    return new RunWatch(this.nc, this.relay(opts.signal), this.names, runId, this.maxLine, opts);
  }

  /**
   * send sends data to the stdin of runId's agent, whose profile must have
   * stdin "stream"; a newline is added if missing. It returns the worker's
   * answer, or throws NotFoundError (no such run), TerminalError (it ended
   * or its stdin was closed), NoInputError (it takes no input),
   * TooLargeError (over maxInputBytes), NoWorkerError (no answer).
   */
  async send(runId: string, data: Uint8Array | string, opts: SendOptions & CallOptions = {}): Promise<InputReply> {
    checkRunId(runId);
    const h = headers();
    if (opts.eof) h.set("Baton-Input-EOF", "true");
    if (opts.msgId) h.set("Nats-Msg-Id", opts.msgId);
    const m = await this.request(this.names.inputSubject(runId), toBytes(data), h, `send to ${runId}`);
    return this.inputReply(m, runId, "send to");
  }

  /**
   * interrupt asks for runId's agent to stop its current turn, as its
   * profile's interrupt says; the run goes on, unlike cancel. Errors are
   * send's.
   */
  async interrupt(runId: string): Promise<InputReply> {
    checkRunId(runId);
    const m = await this.request(this.names.interruptSubject(runId), new Uint8Array(0), undefined, `interrupt ${runId}`);
    return this.inputReply(m, runId, "interrupt");
  }

  /**
   * cancel asks the workers to cancel runId. It returns the worker's
   * answer; throws NotFoundError if there is no such run, TerminalError if
   * it already ended, NoWorkerError if no worker answered. Cancelling
   * twice is harmless.
   */
  async cancel(runId: string): Promise<CancelReply> {
    checkRunId(runId);
    const m = await this.request(this.names.cancelSubject(runId), new Uint8Array(0), undefined, `cancel ${runId}`);
    const code = m.headers?.get("Nats-Service-Error-Code") ?? "";
    if (code !== "") {
      const desc = m.headers?.get("Nats-Service-Error") ?? "";
      if (code === "404") throw new NotFoundError(`baton: run not found: ${runId}`);
      if (code === "409") throw new TerminalError(`baton: run already ended: ${desc}`);
      throw new RefusedError(`baton: cancel ${runId}: refused (${code}): ${desc}`, code);
    }
    return parseReply<CancelReply>(m, `cancel ${runId}`);
  }

  /** sendSession sends text to session id: its live run's input, or its next run's job input. */
  async sendSession(id: string, text: Uint8Array | string, opts: SendOptions = {}): Promise<SessionSendReply> {
    checkSessionId(id);
    const h = headers();
    if (opts.msgId) h.set("Nats-Msg-Id", opts.msgId);
    if (opts.eof) h.set("Baton-Input-EOF", "true");
    const m = await this.request(this.names.sessionSendSubject(id), toBytes(text), h, `send to session ${id}`);
    const code = m.headers?.get("Nats-Service-Error-Code") ?? "";
    if (code !== "") {
      const desc = m.headers?.get("Nats-Service-Error") ?? "";
      switch (code) {
        case "404": throw new NotFoundError(`baton: run not found: ${desc}`);
        case "409": throw new SessionExistsError(`baton: session exists: ${desc}`);
        case "423": throw new SessionLiveError(`baton: session has a live run: ${desc}`);
        case "405": throw new NoInputError(`baton: run takes no input: ${desc}`);
        case "413": throw new TooLargeError(`baton: input too large: ${desc}`);
      }
      throw new RefusedError(`baton: send to session ${id}: refused (${code}): ${desc}`, code);
    }
    return parseReply<SessionSendReply>(m, `send to session ${id}`);
  }

  private inputReply(m: Msg, runId: string, what: string): InputReply {
    const code = m.headers?.get("Nats-Service-Error-Code") ?? "";
    if (code !== "") {
      const desc = m.headers?.get("Nats-Service-Error") ?? "";
      switch (code) {
        case "404": throw new NotFoundError(`baton: run not found: ${desc}`);
        case "409": throw new TerminalError(`baton: run already ended: ${desc}`);
        case "405": throw new NoInputError(`baton: run takes no input: ${desc}`);
        case "413": throw new TooLargeError(`baton: input too large: ${desc}`);
      }
      throw new RefusedError(`baton: ${what} ${runId}: refused (${code}): ${desc}`, code);
    }
    return parseReply<InputReply>(m, `${what} ${runId}`);
  }

  /** request sends a request one worker answers; NoWorkerError when none does in time. */
  private async request(subject: string, data: Uint8Array, h: MsgHdrs | undefined, what: string): Promise<Msg> {
    try {
      return await this.nc.request(subject, data, { headers: h, timeout: this.requestTimeoutMs });
    } catch (e) {
      if (isNoResponders(e)) {
        throw new NoWorkerError(`baton: ${what}: no worker answered: nobody listens on ${subject} (is a \`baton worker\` running?)`, { cause: e });
      }
      if (e instanceof natsErrors.TimeoutError) {
        throw new NoWorkerError(`baton: ${what}: no worker answered within ${this.requestTimeoutMs} ms`, { cause: e });
      }
      throw e;
    }
  }

  /** run returns the record of runId, or throws NotFoundError. It reads through the relay. */
  async run(runId: string, opts: CallOptions = {}): Promise<RunRecord> {
    checkRunId(runId);
    const s = await get(this.relay(opts.signal), this.names.readRunSubject(runId));
    if (!s || isDeleted(s.headers)) throw new NotFoundError(`baton: run not found: ${runId}`);
    return decodeRecord<RunRecord>(s, `run ${runId}`);
  }

  /**
   * runs returns every run record, newest first (by createdAt, then
   * runId). Records that cannot be decoded are left out (and named in
   * `undecodable`). It pages the records bucket through the relay.
   */
  async runs(opts: CallOptions = {}): Promise<RunRecord[] & { undecodable?: string[] }> {
    const prefix = `$KV.${this.names.runsBucket()}.`;
    const latest = new Map<string, Stored>();
    await pages(this.relay(opts.signal), this.names.readRunsSubject(), 1, "", (s) => {
      const key = s.subject.startsWith(prefix) ? s.subject.slice(prefix.length) : s.subject;
      const had = latest.get(key);
      if (!had || s.seq > had.seq) latest.set(key, s);
    });
    const out: RunRecord[] & { undecodable?: string[] } = [];
    const bad: string[] = [];
    for (const [key, s] of latest) {
      if (isDeleted(s.headers)) continue;
      try {
        out.push(decodeRecord<RunRecord>(s, `run ${key}`));
      } catch (e) {
        bad.push(`${key}: ${(e as Error).message}`);
      }
    }
    out.sort((a, b) => (b.createdAt?.getTime() ?? 0) - (a.createdAt?.getTime() ?? 0) || (a.runId < b.runId ? -1 : a.runId > b.runId ? 1 : 0));
    if (bad.length) out.undecodable = bad;
    return out;
  }

  /** session returns the record of session id, or throws NotFoundError. */
  async session(id: string, opts: CallOptions = {}): Promise<SessionRecord> {
    checkSessionId(id);
    const s = await get(this.relay(opts.signal), this.names.readSessionSubject(id));
    if (!s || isDeleted(s.headers)) throw new NotFoundError(`baton: run not found: session ${id}`);
    const rec = decodeRecord<SessionRecord>(s, `session ${id}`);
    if (rec.deleted) throw new NotFoundError(`baton: run not found: session ${id}`);
    return rec;
  }

  /** sessions returns every session, the one used last first; labels keep only those carrying each. */
  async sessions(labels: Record<string, string> = {}, opts: CallOptions = {}): Promise<SessionRecord[]> {
    const prefix = `$KV.${this.names.sessionsBucket()}.`;
    const latest = new Map<string, Stored>();
    await pages(this.relay(opts.signal), this.names.readSessionsSubject(), 1, "", (s) => {
      latest.set(s.subject.startsWith(prefix) ? s.subject.slice(prefix.length) : s.subject, s);
    });
    const out: SessionRecord[] = [];
    for (const [id, s] of latest) {
      if (isDeleted(s.headers)) continue;
      let rec: SessionRecord;
      try {
        rec = decodeRecord<SessionRecord>(s, `session ${id}`);
      } catch {
        continue;
      }
      if (rec.deleted || !Object.entries(labels).every(([k, v]) => rec.labels?.[k] === v)) continue;
      out.push(rec);
    }
    out.sort((a, b) => (b.updatedAt?.getTime() ?? 0) - (a.updatedAt?.getTime() ?? 0) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    return out;
  }

  /** status returns runId's last status, or null when it has none yet. */
  async status(runId: string, opts: CallOptions = {}): Promise<Status | null> {
    checkRunId(runId);
    const s = await get(this.relay(opts.signal), this.names.readStatusSubject(runId));
    if (!s) return null;
    try {
      return JSON.parse(decoder.decode(s.data)) as Status;
    } catch (e) {
      throw new RelayError(`baton: run ${runId}: bad status: ${(e as Error).message}`);
    }
  }

  /**
   * outputs returns what runId's capture stored, from its terminal status
   * (published only once they are stored): NotFoundError for an unknown
   * run, NotEndedError for one still going.
   */
  async outputs(runId: string, opts: CallOptions = {}): Promise<RunOutputs> {
    const st = await this.status(runId, opts);
    if (!st) {
      try {
        const rec = await this.run(runId, opts);
        throw new NotEndedError(`baton: run has not ended: ${runId} is ${rec.state}; its outputs are captured when it ends`);
      } catch (e) {
        if (!(e instanceof NotFoundError)) throw e;
      }
      throw new NotFoundError(`baton: run not found: ${runId} (no worker has started it)`);
    }
    if (!isTerminal(st.status)) {
      throw new NotEndedError(`baton: run has not ended: ${runId} is ${st.status}; its outputs are captured when it ends`);
    }
    return { runId, status: st.status, outputs: st.outputs ?? [], error: st.outputsError, notes: st.outputsNotes };
  }

  /** @internal The info of output object name, through the relay. */
  async objectInfo(name: string, signal?: AbortSignal): Promise<ObjectInfo> {
    const runId = name.split("/", 1)[0];
    if (!validRunId(runId) || !name.includes("/")) {
      throw new InvalidError(`baton: ${JSON.stringify(name)} is not an output name`);
    }
    const s = await get(this.relay(signal), this.names.readObjectSubject(runId), name);
    let info: ObjectInfo | null = null;
    if (s) {
      try {
        info = JSON.parse(decoder.decode(s.data)) as ObjectInfo;
      } catch (e) {
        throw new RelayError(`baton: get ${name}: unreadable info: ${(e as Error).message}`);
      }
    }
    if (!info || info.deleted || info.name !== name) {
      throw new NotFoundError(`baton: get ${name}: object not found`);
    }
    return info;
  }

  /** storedOutput returns output object name ("<runId>/…") as the store holds it. */
  async storedOutput(name: string, opts: CallOptions = {}): Promise<Output> {
    const info = await this.objectInfo(name, opts.signal);
    const o: Output = { name, size: info.size, digest: info.digest };
    const path = info.metadata?.["baton-path"];
    if (path) o.path = path;
    return o;
  }

  /**
   * getOutput returns o's content, checked against o's size and SHA-256
   * (Web Crypto): a DigestError when the store's bytes are not what o
   * lists. It reads the object's info and chunks through the relay.
   */
  async getOutput(o: Output, opts: CallOptions = {}): Promise<Uint8Array> {
    const info = await this.objectInfo(o.name, opts.signal);
    const runId = o.name.split("/", 1)[0];
    const pieces: Uint8Array[] = [];
    let n = 0;
    let over = false;
    if (info.chunks > 0) {
      const stop = new Error("more than listed");
      try {
        await pages(this.relay(opts.signal), this.names.readChunksSubject(runId), 1, o.name, (s) => {
          n += s.data.length;
          if (n > o.size) {
            over = true;
            throw stop; // never kept past the size
          }
          pieces.push(s.data);
        });
      } catch (e) {
        if (e !== stop) throw e;
      }
    }
    const body = new Uint8Array(over ? 0 : n);
    if (!over) {
      let at = 0;
      for (const p of pieces) {
        body.set(p, at);
        at += p.length;
      }
    }
    const got = "SHA-256=" + base64url(new Uint8Array(await crypto.subtle.digest("SHA-256", body as Uint8Array<ArrayBuffer>)));
    if (over || n !== o.size || got !== o.digest) {
      throw new DigestError(`baton: output does not match its digest: ${o.name} is ${over ? `over ${o.size}` : n} bytes ${over ? "" : got}, listed ${o.size} bytes ${o.digest}`);
    }
    return body;
  }

  /**
   * putWorkspace stores the archive (a tar, or a gzipped tar) in the
   * workspaces stream and returns its name for a job's workspace,
   * "sha256-<hex>.tar.gz" (".tar" when not gzipped): the same archive
   * again stores nothing. Go: client.PutWorkspace.
   */
  putWorkspace(archive: Uint8Array | Blob, opts: PutWorkspaceOptions = {}): Promise<string> {
    return putWorkspace(this, archive, opts);
  }

  /** chainStored reports whether any message of runId's chain is still in the events stream. */
  async chainStored(runId: string, opts: CallOptions = {}): Promise<boolean> {
    checkRunId(runId);
    let found = false;
    await page(this.relay(opts.signal), this.names.readEventsSubject(runId), { max: 1 }, false, () => {
      found = true;
    });
    return found;
  }
}

export interface PubAck {
  stream: string;
  seq: number;
  duplicate: boolean;
}

/** An object's info, as the object store keeps it. */
export interface ObjectInfo {
  name: string;
  size: number;
  chunks: number;
  digest: string;
  deleted?: boolean;
  metadata?: Record<string, string>;
  [k: string]: unknown;
}

function isNoResponders(e: unknown): boolean {
  return e instanceof natsErrors.NoRespondersError ||
    (e instanceof natsErrors.RequestError && e.isNoResponders());
}

function parseReply<T>(m: Msg, what: string): T {
  try {
    return JSON.parse(decoder.decode(m.data)) as T;
  } catch (e) {
    throw new BatonError("unreadable", `baton: ${what}: unreadable answer ${JSON.stringify(decoder.decode(m.data))}: ${(e as Error).message}`);
  }
}

function decodeRecord<T>(s: Stored, what: string): T {
  let v: unknown;
  try {
    v = decodeMsgpack(s.data);
  } catch (e) {
    throw new BatonError("decode", `baton: ${what}: undecodable record (seq ${s.seq}): ${(e as Error).message}`);
  }
  if (v === null || typeof v !== "object" || Array.isArray(v)) {
    throw new BatonError("decode", `baton: ${what}: record (seq ${s.seq}) is not a map`);
  }
  return v as T;
}

/** base64url with padding, as Go's base64.URLEncoding writes it. */
export function base64url(b: Uint8Array): string {
  let bin = "";
  for (let i = 0; i < b.length; i++) bin += String.fromCharCode(b[i]);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_");
}
