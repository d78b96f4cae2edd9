import { claude } from "./claude.js";
import { codexApp, codexExec } from "./codex.js";
import { type Dialect, DialectClaude, DialectCodexAppServer, DialectCodexExec, sniff } from "./dialect.js";
import { type Ev, encodeEvent, encodeUsages, type Event, EventType, type OutcomeType, Position, type Usage } from "./event.js";
import { asked, interrupts } from "./approval.js";
import { input, jobEcho } from "./input.js";
import {
  base64Encode,
  byteLen,
  compact,
  type GoType,
  goBytes,
  goString,
  obj,
  omitBool,
  omitInt,
  omitRaw,
  omitStr,
  parseInt64,
  ptr,
  quote,
  slice,
  strMap,
  struct,
  unmarshal,
  valid,
} from "./json.js";
import { fnvAdd, fnvOffset } from "./fnv.js";
import { utf8Encoder } from "./text.js";

/** The headers of a chain message: a record (a value, or its values), or
 * anything with get (a nats.js MsgHdrs, a Headers, a Map). */
export type Headers =
  | Record<string, string | readonly string[] | undefined>
  | { get(key: string): string | null | undefined };

/** Message is one message of a run's chain, as stored. */
export interface Message {
  /** The subject's last token: events, raw, status or input. */
  kind: string;
  /** The message's stream sequence (Nats-Sequence), from 1. */
  seq: bigint | number;
  /** Baton-Chunk, and on inputs Baton-Input-Seq, Baton-Input-EOF and
   * Baton-Input-Kind. */
  headers?: Headers;
  /** The payload: bytes, or text (encoded as UTF-8). */
  data: Uint8Array | string;
  /** The stored time (Nats-Time-Stamp), a Date or milliseconds since the
   * epoch; absent leaves the events' timestamps out. */
  time?: Date | number;
}

/** Projected is an event, its position, and its JSON as the Go package
 * marshals it (byte for byte, once goBytes encodes it). */
export interface Projected {
  pos: Position;
  event: Event;
  json: string;
}

/** ProjectorOptions are the Go package's Options. */
export interface ProjectorOptions {
  /** The agent's dialect (a profile's `events`); absent or "" sniffs. */
  dialect?: Dialect;
  /** The AG-UI threadId (a run's session); the default is the runId. */
  threadId?: string;
  /** The job's input, echoed as the first user turn. */
  jobInput?: Uint8Array | string;
  /** Return only the events after this position: a resume. */
  after?: Position;
  /** Bound of a line joined from chunks (DefaultMaxLine). */
  maxLine?: number;
}

/** DefaultMaxLine bounds the line a projector reassembles from chunks. */
export const DefaultMaxLine = 64 << 20;

const HeaderChunk = "Baton-Chunk";

export type Kind = "text" | "reasoning" | "tool";

/** An open stream or a pending tool call. */
export interface Entity {
  key: string;
  kind: Kind;
  id: string;
  tool: string;
  sent: number;
  sum: bigint;
}

export interface Turn {
  line: string | null;
  error: string;
  code: string;
  cancelled: boolean;
  usage: Usage[] | null;
}

export function newTurn(t: Partial<Turn> = {}): Turn {
  return { line: null, error: "", code: "", cancelled: false, usage: null, ...t };
}

interface Chunk {
  kind: string;
  n: bigint;
  next: bigint;
  first: bigint;
  buf: Uint8Array[];
  len: number;
  over: boolean;
}

interface State {
  v: number;
  runId: string;
  lastSeq: bigint;
  dialect: string;
  runs: number;
  run: string;
  open: Entity[];
  pending: Entity[];
  msg: string;
  streamed: boolean;
  parent: string;
  turn: Turn | null;
  interrupted: boolean;
  asks: Ask[];
  askWait: string | null;
  chunk: Chunk | null;
}

/** A permission prompt waiting for a person's answer (see approval.ts). */
export interface Ask {
  id: string;
  tool: string;
  target: string;
  rule: string;
  call: string;
}

const stateVersion = 1;
const maxOpen = 256;
const maxPending = 256;

/** The error restore throws for bytes that are no state of this run's
 * projector. */
export class BadStateError extends Error {
  constructor(msg: string) {
    super("bad projector state: " + msg);
    this.name = "BadStateError";
  }
}

const usageType = struct({
  provider: "s",
  model: "s",
  inputTokens: "i",
  outputTokens: "i",
  totalTokens: "i",
  reasoningTokens: "i",
  cachedInputTokens: "i",
  cacheWriteInputTokens: "i",
});
const entityType = struct({ key: "s", kind: "s", id: "s", tool: "s", sent: "i", sum: "u" });
const stateType = struct({
  v: "i",
  runId: "s",
  lastSeq: "u",
  dialect: "s",
  runs: "i",
  run: "s",
  open: slice(entityType),
  pending: slice(entityType),
  msg: "s",
  streamed: "b",
  parent: "s",
  turn: ptr(struct({ line: "r", error: "s", code: "s", cancelled: "b", usage: slice(usageType) })),
  interrupted: "b",
  asks: slice(struct({ id: "s", tool: "s", target: "s", rule: "s", call: "s" })),
  askWait: "r",
  chunk: ptr(struct({ kind: "s", n: "i", next: "i", first: "u", buf: "bytes", over: "b" })),
});

const outputType = struct({ name: "s", path: "s", size: "u", digest: "s" });
const statusType: GoType = struct({
  status: "s",
  runId: "s",
  worker: "s",
  node: "s",
  epoch: "u",
  offset: "i",
  attempt: "i",
  exitCode: ptr("i"),
  signal: "s",
  stderrTail: "s",
  reason: "s",
  retriedAs: "s",
  time: "t",
  outputs: slice(outputType),
  outputsError: "s",
  outputsNotes: slice("s"),
  session: "s",
  checkpoint: ptr(
    struct({
      object: "s",
      digest: "s",
      size: "u",
      files: "i",
      treeBytes: "i",
      base: "b",
      run: "s",
      setup: "b",
      created: "t",
    }),
  ),
  checkpointError: "s",
});

const terminal = new Set(["succeeded", "failed", "cancelled", "timeout", "lost", "paused"]);

/** errorMeta marks a tool result that is an error. */
export const errorMeta = `{"isError":true}`;

const toBytes = (d: Uint8Array | string): Uint8Array => (typeof d === "string" ? utf8Encoder.encode(d) : d);

/** Projector turns a run's chain into AG-UI events, one message at a
 * time, deterministically: the same messages give the same events, ids
 * and positions (those of the Go package's Projector, byte for byte). */
export class Projector {
  /** @internal */ readonly runId: string;
  /** @internal */ readonly threadId: string;
  /** @internal */ readonly dialect: Dialect;
  /** @internal */ readonly jobInput: string;
  /** @internal */ readonly after: Position;
  /** @internal */ readonly maxLine: number;
  /** @internal */ st: State;
  // The message being projected.
  /** @internal */ seq = 0n;
  /** @internal */ index = 0;
  /** @internal */ time = 0;
  /** @internal */ msg: Message | null = null;
  /** @internal */ out: Projected[] = [];

  constructor(runId: string, opts: ProjectorOptions = {}) {
    this.runId = runId;
    this.threadId = opts.threadId || runId;
    this.dialect = opts.dialect ?? "";
    this.jobInput = opts.jobInput === undefined ? "" : goString(toBytes(opts.jobInput));
    this.after = opts.after ?? new Position();
    this.maxLine = opts.maxLine ?? DefaultMaxLine;
    this.st = freshState(runId);
  }

  /** state is the projector's state after the last message it read (the
   * Go package's State, the same bytes), to carry instead of reading the
   * chain again: restore it on a projector made with the same options. */
  state(): string {
    const s = this.st;
    const entity = (e: Entity) =>
      obj([
        ["key", quote(e.key)],
        ["kind", quote(e.kind)],
        ["id", quote(e.id)],
        ["tool", omitStr(e.tool)],
        ["sent", omitInt(e.sent)],
        ["sum", omitInt(e.sum)],
      ]);
    const list = (es: Entity[]) => (es.length > 0 ? "[" + es.map(entity).join(",") + "]" : undefined);
    const t = s.turn;
    const c = s.chunk;
    return obj([
      ["v", String(s.v)],
      ["runId", quote(s.runId)],
      ["lastSeq", omitInt(s.lastSeq)],
      ["dialect", omitStr(s.dialect)],
      ["runs", omitInt(s.runs)],
      ["run", omitStr(s.run)],
      ["open", list(s.open)],
      ["pending", list(s.pending)],
      ["msg", omitStr(s.msg)],
      ["streamed", omitBool(s.streamed)],
      ["parent", omitStr(s.parent)],
      [
        "turn",
        t === null
          ? undefined
          : obj([
            ["line", omitRaw(t.line)],
            ["error", omitStr(t.error)],
            ["code", omitStr(t.code)],
            ["cancelled", omitBool(t.cancelled)],
            ["usage", encodeUsages(t.usage)],
          ]),
      ],
      ["interrupted", omitBool(s.interrupted)],
      [
        "asks",
        s.asks.length > 0
          ? "[" +
            s.asks
              .map((a) =>
                obj([
                  ["id", quote(a.id)],
                  ["tool", omitStr(a.tool)],
                  ["target", omitStr(a.target)],
                  ["rule", omitStr(a.rule)],
                  ["call", omitStr(a.call)],
                ])
              )
              .join(",") +
            "]"
          : undefined,
      ],
      ["askWait", omitRaw(s.askWait)],
      [
        "chunk",
        c === null
          ? undefined
          : obj([
            ["kind", quote(c.kind)],
            ["n", String(c.n)],
            ["next", String(c.next)],
            ["first", String(c.first)],
            ["buf", c.len > 0 ? quote(base64Encode(concat(c.buf, c.len))) : undefined],
            ["over", omitBool(c.over)],
          ]),
      ],
    ]);
  }

  /** restore replaces the projector's state with one state() (or the Go
   * package's State) returned; it throws BadStateError. */
  restore(b: string | Uint8Array): void {
    const { v, ok } = unmarshal(typeof b === "string" ? b : goString(b), stateType);
    if (!ok) throw new BadStateError("not a projector's state");
    if (v.v !== BigInt(stateVersion) || v.runId !== this.runId) {
      throw new BadStateError(`version ${v.v} of run ${JSON.stringify(v.runId)}, want version ${stateVersion} of run ${JSON.stringify(this.runId)}`);
    }
    const entity = (e: any): Entity => ({ key: e.key, kind: e.kind, id: e.id, tool: e.tool, sent: Number(e.sent), sum: e.sum });
    const u = (x: any): Usage => ({ ...x });
    const t = v.turn;
    const c = v.chunk;
    this.st = {
      v: stateVersion,
      runId: v.runId,
      lastSeq: v.lastSeq,
      dialect: v.dialect,
      runs: Number(v.runs),
      run: v.run,
      open: (v.open ?? []).map(entity),
      pending: (v.pending ?? []).map(entity),
      msg: v.msg,
      streamed: v.streamed,
      parent: v.parent,
      turn: t && { line: t.line, error: t.error, code: t.code, cancelled: t.cancelled, usage: t.usage && t.usage.map(u) },
      interrupted: v.interrupted,
      asks: (v.asks ?? []).map((a: any): Ask => ({ id: a.id, tool: a.tool, target: a.target, rule: a.rule, call: a.call })),
      askWait: v.askWait,
      chunk: c && {
        kind: c.kind,
        n: c.n,
        next: c.next,
        first: c.first,
        buf: c.buf ? [c.buf] : [],
        len: c.buf ? c.buf.length : 0,
        over: c.over,
      },
    };
  }

  /** project reads the chain's next message and returns its events (none
   * for a piece of a chunked line but the last). A message at or before
   * the last one read is skipped, so overlapping pages are harmless. */
  project(m: Message): Projected[] {
    const seq = BigInt(m.seq);
    if (seq === 0n || seq <= this.st.lastSeq) return [];
    this.st.lastSeq = seq;
    this.seq = seq;
    this.index = 0;
    this.out = [];
    this.time = 0;
    this.msg = m;
    if (m.time !== undefined) this.time = Math.floor(typeof m.time === "number" ? m.time : m.time.getTime());
    const data = this.assemble(m);
    if (data === undefined) return this.out;
    const s = goString(data);
    switch (m.kind) {
      case "status":
        this.status(s);
        break;
      case "input":
        input(this, m, s);
        break;
      case "events":
        this.line(s);
        break;
      case "raw":
        this.custom("baton.raw", strMap({ line: s }));
        break;
    }
    return this.out;
  }

  /** @internal assemble joins the pieces of a chunked line (undefined
   * while pieces are missing); a broken sequence is reported and dropped. */
  assemble(m: Message): Uint8Array | undefined {
    const h = header(m, HeaderChunk);
    const c0 = this.st.chunk;
    if (c0 && (h === "" || m.kind !== c0.kind)) {
      this.st.chunk = null;
      this.fault(`the line started at seq ${c0.first} lacks pieces ${c0.next}..${c0.n} of ${c0.n}`);
    }
    const data = toBytes(m.data);
    if (h === "") return data;
    const pc = parseChunk(h);
    if (!pc) {
      this.fault(`seq ${this.seq} has a bad ${HeaderChunk} header ${goQuote(h)}`);
      return undefined;
    }
    const [i, n] = pc;
    let c = this.st.chunk;
    if (!c) {
      if (i !== 1n) {
        this.fault(`seq ${this.seq} is piece ${i}/${n} of a line whose first piece is missing`);
        return undefined;
      }
      if (n === 1n) return data;
      c = { kind: m.kind, n, next: 1n, first: this.seq, buf: [], len: 0, over: false };
      this.st.chunk = c;
    }
    if (i !== c.next || n !== c.n) {
      this.st.chunk = null;
      this.fault(`the line started at seq ${c.first} expected piece ${c.next}/${c.n}, seq ${this.seq} is ${i}/${n}`);
      return undefined;
    }
    c.next++;
    if (!c.over && c.len + data.length > this.maxLine) {
      c.over = true;
      c.buf = [];
      c.len = 0;
    }
    if (!c.over) {
      c.buf.push(data);
      c.len += data.length;
    }
    if (i < n) return undefined;
    this.st.chunk = null;
    if (c.over) {
      this.fault(`the line started at seq ${c.first} is larger than ${this.maxLine} bytes: dropped`);
      return undefined;
    }
    return concat(c.buf, c.len);
  }

  /** @internal fault reports a chain that cannot be read as baton writes it. */
  fault(message: string): void {
    this.custom("baton.error", strMap({ message }));
  }

  /** @internal emit appends ev at the next position, opening a run first
   * if none is open. */
  emit(ev: Ev): void {
    if (ev.type !== EventType.RunStarted && this.st.run === "") this.openRun(null);
    ev.timestamp = this.time;
    const pos = new Position(this.seq, this.index);
    if (this.after.less(pos)) {
      const json = encodeEvent(ev);
      this.out.push({ pos, event: JSON.parse(json) as Event, json });
    }
    this.index++;
  }

  /** @internal newID returns a fresh AG-UI id: the runId and the position
   * of the event about to be emitted. */
  newID(): string {
    if (this.st.run === "") this.openRun(null);
    return `${this.runId}:${this.seq}:${this.index}`;
  }

  /** @internal openRun starts an AG-UI run. */
  openRun(status: string | null): void {
    let id = this.runId;
    if (this.st.runs > 0) id += `:${this.seq}:${this.index}`;
    this.st.runs++;
    this.st.run = id;
    this.emit({ type: EventType.RunStarted, threadId: this.threadId, runId: id, rawEvent: status });
    if (this.st.runs === 1 && this.jobInput.length > 0) jobEcho(this, this.jobInput);
  }

  /** @internal closeRun ends the open run (see the Go package). */
  closeRun(status: string, reason: string, statusRaw: string): void {
    if (this.st.run === "") this.openRun(null);
    while (this.st.open.length > 0) this.end(this.st.open[0]!.key);
    let why = "no result: the turn ended";
    if (terminal.has(status)) why = `no result: the run ended (${status})`;
    // A turn that stops at a prompt a person is asked about is
    // interrupted, not over: the tool calls the prompts are about wait on.
    const interrupt = this.st.asks.length > 0 && (status === "waiting" || status === "paused");
    const waitOn: Entity[] = [];
    while (this.st.pending.length > 0) {
      if (interrupt && !terminal.has(status) && asked(this, this.st.pending[0]!.id)) {
        waitOn.push(this.st.pending.shift()!);
        continue;
      }
      this.abandon(why);
    }
    this.st.pending = waitOn;
    const t = this.st.turn ?? newTurn();
    const result = obj([
      ["status", omitRaw(statusRaw) ?? "null"],
      ["turn", omitRaw(t.line)],
    ]);
    if (status === "failed" || status === "timeout" || status === "lost") {
      const msg = reason || `run ${status}`;
      this.emit({ type: EventType.RunError, message: msg, code: status, usage: t.usage, rawEvent: result });
    } else if (status === "cancelled" || t.cancelled || (t.error !== "" && this.st.interrupted)) {
      this.finish("cancelled", result, t.usage);
    } else if (interrupt) {
      this.emit({
        type: EventType.RunFinished,
        threadId: this.threadId,
        runId: this.st.run,
        outcome: "interrupt",
        interrupts: interrupts(this),
        result,
        usage: t.usage,
      });
    } else if (t.error !== "") {
      this.emit({ type: EventType.RunError, message: t.error, code: t.code, usage: t.usage, rawEvent: result });
    } else {
      this.finish("success", result, t.usage);
    }
    this.st.run = "";
    this.st.turn = null;
    this.st.interrupted = false;
    this.st.msg = "";
    this.st.streamed = false;
    this.st.parent = "";
    this.st.askWait = null;
    // Nothing waits on an answer once the run ended.
    if (terminal.has(status)) this.st.asks = [];
  }

  private finish(o: OutcomeType, result: string, usage: Usage[] | null): void {
    this.emit({ type: EventType.RunFinished, threadId: this.threadId, runId: this.st.run, outcome: o, result, usage });
  }

  /** @internal status projects a status message. */
  status(data: string): void {
    const { v: st, ok } = unmarshal(data, statusType);
    if (!ok || st.status === "") {
      this.raw(data, "baton");
      return;
    }
    const raw = compact(data);
    if (st.status === "started" && this.st.run === "") {
      this.openRun(raw);
    } else if (st.status === "waiting" && st.reason === "approval" && this.st.asks.length === 0) {
      // Waiting on a prompt whose line comes next: the turn ends there.
      this.custom("baton.waiting", raw);
      this.st.askWait = raw;
    } else if (st.status === "waiting") {
      this.custom("baton.waiting", raw);
      this.closeRun(st.status, st.reason, raw);
    } else if (terminal.has(st.status)) {
      this.closeRun(st.status, st.reason, raw);
    } else {
      this.st.askWait = null;
      this.custom("baton." + st.status, raw);
    }
  }

  /** @internal custom emits a CUSTOM event; value is JSON text. */
  custom(name: string, value: string): void {
    this.emit({ type: EventType.Custom, name, value });
  }

  /** @internal raw emits line as a RAW event when it is JSON, else as
   * baton.raw. */
  raw(line: string, source: string): void {
    if (!valid(line)) {
      this.custom("baton.raw", strMap({ line }));
      return;
    }
    this.emit({ type: EventType.Raw, event: compact(line), source });
  }

  /** @internal line projects an events line by the dialect. */
  line(data: string): void {
    if (!valid(data)) {
      this.raw(data, "agent");
      return;
    }
    let d: string = this.dialect;
    if (d === "") {
      if (this.st.dialect === "") this.st.dialect = sniff(data);
      d = this.st.dialect;
    }
    switch (d) {
      case DialectClaude:
        claude(this, data);
        break;
      case DialectCodexExec:
        codexExec(this, data);
        break;
      case DialectCodexAppServer:
        codexApp(this, data);
        break;
      default:
        this.raw(data, "agent");
    }
  }

  /** @internal startText opens a text message (role assistant) under key. */
  startText(key: string): Entity {
    const id = this.newID();
    this.emit({ type: EventType.TextMessageStart, messageId: id, role: "assistant" });
    this.st.parent = id;
    return this.opened({ key, kind: "text", id, tool: "", sent: 0, sum: fnvOffset });
  }

  /** @internal opened adds e to the open streams, ending the oldest past
   * maxOpen. */
  opened(e: Entity): Entity {
    this.st.open.push(e);
    if (this.st.open.length > maxOpen) this.end(this.st.open[0]!.key);
    return this.st.open[this.st.open.length - 1]!;
  }

  /** @internal waiting adds a tool call to those waiting for a result. */
  waiting(t: Entity): void {
    this.st.pending.push(t);
    if (this.st.pending.length > maxPending) this.abandon("no result: too many tool calls were waiting for theirs");
  }

  /** @internal abandon gives the oldest tool call waiting a result saying
   * why it has none. */
  abandon(why: string): void {
    const t = this.st.pending.shift()!;
    this.emit({ type: EventType.ToolCallResult, messageId: this.newID(), toolCallId: t.id, content: why, role: "tool", metadata: errorMeta });
  }

  /** @internal startReasoning opens a reasoning span and its message. */
  startReasoning(key: string): Entity {
    const id = this.newID();
    this.emit({ type: EventType.ReasoningStart, messageId: id });
    this.emit({ type: EventType.ReasoningMessageStart, messageId: id, role: "reasoning" });
    return this.opened({ key, kind: "reasoning", id, tool: "", sent: 0, sum: fnvOffset });
  }

  /** @internal startTool opens a tool call under key. */
  startTool(key: string, toolId: string, name: string): void {
    if (name === "") name = "tool";
    const id = this.newID();
    this.emit({ type: EventType.ToolCallStart, toolCallId: id, toolCallName: name, parentMessageId: this.st.parent });
    this.opened({ key, kind: "tool", id, tool: toolId, sent: 0, sum: 0n });
  }

  /** @internal delta appends text to the open stream e. */
  delta(e: Entity | undefined, text: string): void {
    if (text === "") return;
    // Go would dereference a nil entity here; the Go projection never
    // passes one with text.
    switch (e!.kind) {
      case "text":
        this.emit({ type: EventType.TextMessageContent, messageId: e!.id, delta: text });
        break;
      case "reasoning":
        this.emit({ type: EventType.ReasoningMessageContent, messageId: e!.id, delta: text });
        break;
      case "tool":
        this.emit({ type: EventType.ToolCallArgs, toolCallId: e!.id, delta: text });
        break;
    }
  }

  /** @internal open returns the open stream with key. */
  open(key: string): Entity | undefined {
    return this.st.open.find((e) => e.key === key);
  }

  /** @internal end closes the open stream with key. */
  end(key: string): void {
    const i = this.st.open.findIndex((e) => e.key === key);
    if (i < 0) return;
    const e = this.st.open[i]!;
    this.st.open.splice(i, 1);
    switch (e.kind) {
      case "text":
        this.emit({ type: EventType.TextMessageEnd, messageId: e.id });
        break;
      case "reasoning":
        this.emit({ type: EventType.ReasoningMessageEnd, messageId: e.id });
        this.emit({ type: EventType.ReasoningEnd, messageId: e.id });
        break;
      case "tool":
        this.emit({ type: EventType.ToolCallEnd, toolCallId: e.id });
        this.waiting({ key: e.tool, kind: "tool", id: e.id, tool: "", sent: 0, sum: 0n });
        break;
    }
  }

  /** @internal tool emits a whole tool call: start, arguments, end. */
  tool(toolId: string, name: string, args: string): void {
    const key = "tool:" + toolId;
    this.startTool(key, toolId, name);
    this.delta(this.open(key), args);
    this.end(key);
  }

  /** @internal known reports whether the agent's tool call toolId was
   * started and has no result yet. */
  known(toolId: string): boolean {
    if (this.st.open.some((e) => e.kind === "tool" && e.tool === toolId)) return true;
    return this.toolID(toolId) !== "";
  }

  /** @internal toolID returns the AG-UI id of the pending tool call of the
   * agent's toolId, or "". */
  toolID(toolId: string): string {
    return this.st.pending.find((e) => e.key === toolId)?.id ?? "";
  }

  /** @internal result emits the result of the agent's tool call toolId; a
   * result for no pending call is passed on as RAW line. */
  result(toolId: string, content: string, isError: boolean, line: string, source: string): void {
    const i = this.st.pending.findIndex((e) => e.key === toolId);
    if (i < 0) {
      this.raw(line, source);
      return;
    }
    const id = this.st.pending[i]!.id;
    this.st.pending.splice(i, 1);
    this.st.parent = "";
    const ev: Ev = { type: EventType.ToolCallResult, messageId: this.newID(), toolCallId: id, content, role: "tool" };
    if (isError) ev.metadata = errorMeta;
    this.emit(ev);
  }

  /** @internal turnEnd records the agent's account of its turn. */
  turnEnd(line: string, t: Turn): void {
    const prev = this.st.turn;
    if (prev && t.usage === null) t.usage = prev.usage;
    t.line = compact(line);
    this.st.turn = t;
  }

  /** @internal itemSend sends text on the open item stream key and counts
   * it sent (Codex). */
  send(key: string, text: string): Entity {
    this.delta(this.open(key), text);
    const e = this.open(key)!;
    e.sent += byteLen(text);
    e.sum = fnvAdd(e.sum, goBytes(text));
    return e;
  }
}

function freshState(runId: string): State {
  return {
    v: stateVersion,
    runId,
    lastSeq: 0n,
    dialect: "",
    runs: 0,
    run: "",
    open: [],
    pending: [],
    msg: "",
    streamed: false,
    parent: "",
    turn: null,
    interrupted: false,
    asks: [],
    askWait: null,
    chunk: null,
  };
}

/** header is a message's first value of key, or "". */
export function header(m: Message, key: string): string {
  const h = m.headers;
  if (!h) return "";
  if (typeof (h as { get?: unknown }).get === "function") {
    return (h as { get(key: string): string | null | undefined }).get(key) ?? "";
  }
  const v = (h as Record<string, string | readonly string[] | undefined>)[key];
  if (v === undefined) return "";
  if (typeof v === "string") return v;
  return v.length > 0 ? v[0]! : "";
}

/** parseChunk reads a Baton-Chunk header "i/n", 1 <= i <= n. */
function parseChunk(h: string): [bigint, bigint] | undefined {
  const at = h.indexOf("/");
  if (at < 0) return undefined;
  const a = h.slice(0, at);
  const b = h.slice(at + 1);
  if (a === "" || b === "" || a[0] === "+" || b[0] === "+") return undefined;
  const i = parseInt64(a);
  const n = parseInt64(b);
  if (i === undefined || n === undefined || i < 1n || i > n) return undefined;
  return [i, n];
}

function concat(parts: Uint8Array[], len: number): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  const out = new Uint8Array(len);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/** goQuote is Go's strconv.Quote (fmt's %q) of a string. */
export function goQuote(s: string): string {
  let out = '"';
  for (let i = 0; i < s.length; ) {
    const c = s.codePointAt(i)!;
    const w = c > 0xffff ? 2 : 1;
    const ch = s.slice(i, i + w);
    i += w;
    if (c >= 0xdc80 && c <= 0xdcff) {
      out += "\\x" + (c - 0xdc00).toString(16).padStart(2, "0");
    } else if (c === 0x22 || c === 0x5c) {
      out += "\\" + ch;
    } else if (c < 0x80 && c >= 0x20 && c !== 0x7f) {
      out += ch;
    } else if (c >= 0x80 && c !== 0xfffd && /^[\p{L}\p{M}\p{N}\p{P}\p{S}]$/u.test(ch)) {
      out += ch;
    } else if (c === 0xfffd) {
      out += ch;
    } else {
      const named: Record<number, string> = { 7: "\\a", 8: "\\b", 12: "\\f", 10: "\\n", 13: "\\r", 9: "\\t", 11: "\\v" };
      if (named[c]) out += named[c];
      else if (c < 0x20 || c === 0x7f) out += "\\x" + c.toString(16).padStart(2, "0");
      else if (c >= 0xd800 && c <= 0xdfff) out += "\\ufffd";
      else if (c < 0x10000) out += "\\u" + c.toString(16).padStart(4, "0");
      else out += "\\U" + c.toString(16).padStart(8, "0");
    }
  }
  return out + '"';
}
