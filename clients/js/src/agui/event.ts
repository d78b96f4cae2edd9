import { obj, omitInt, omitRaw, omitStr, quote } from "./json.js";

/** The AG-UI event types a projection emits. */
export const EventType = {
  RunStarted: "RUN_STARTED",
  RunFinished: "RUN_FINISHED",
  RunError: "RUN_ERROR",
  TextMessageStart: "TEXT_MESSAGE_START",
  TextMessageContent: "TEXT_MESSAGE_CONTENT",
  TextMessageEnd: "TEXT_MESSAGE_END",
  ReasoningStart: "REASONING_START",
  ReasoningMessageStart: "REASONING_MESSAGE_START",
  ReasoningMessageContent: "REASONING_MESSAGE_CONTENT",
  ReasoningMessageEnd: "REASONING_MESSAGE_END",
  ReasoningEnd: "REASONING_END",
  ToolCallStart: "TOOL_CALL_START",
  ToolCallArgs: "TOOL_CALL_ARGS",
  ToolCallEnd: "TOOL_CALL_END",
  ToolCallResult: "TOOL_CALL_RESULT",
  Raw: "RAW",
  Custom: "CUSTOM",
} as const;
export type EventType = (typeof EventType)[keyof typeof EventType];

/** Outcomes of RUN_FINISHED: interrupt when the agent waits on a
 * permission prompt its run's policy asks a person about. */
export type OutcomeType = "success" | "cancelled" | "interrupt";

/** An interrupt of RUN_FINISHED's interrupt outcome (@ag-ui/core's
 * Interrupt): a permission prompt awaiting a person's answer, which the
 * next RunAgentInput's resume gives by its id. */
export interface Interrupt {
  /** The approval's id within its run. */
  id: string;
  /** "approval". */
  reason: string;
  message?: string;
  toolCallId?: string;
  responseSchema?: Record<string, unknown>;
  /** The approval's runId, tool, target and rule. */
  metadata?: { runId: string; tool?: string; target?: string; rule?: string };
}

/** AG-UI's token accounting for one provider and model. */
export interface TokenUsage {
  provider?: string;
  model?: string;
  inputTokens?: number;
  outputTokens?: number;
  totalTokens?: number;
  reasoningTokens?: number;
  cachedInputTokens?: number;
  cacheWriteInputTokens?: number;
}

/** One AG-UI event (AG-UI 1.0, @ag-ui/core), as the Go package's Event
 * marshals it: a field an event type does not have is absent. JSON
 * fields (value, event, result, metadata, rawEvent) are parsed. */
export interface Event {
  type: EventType;
  threadId?: string;
  runId?: string;
  messageId?: string;
  role?: string;
  toolCallId?: string;
  toolCallName?: string;
  parentMessageId?: string;
  delta?: string;
  content?: string;
  name?: string;
  value?: unknown;
  event?: unknown;
  source?: string;
  message?: string;
  code?: string;
  outcome?: { type: OutcomeType; interrupts?: Interrupt[] };
  result?: unknown;
  usage?: TokenUsage[];
  /** The chain message's stored time, in milliseconds since the epoch. */
  timestamp?: number;
  metadata?: unknown;
  rawEvent?: unknown;
}

/** Usage is TokenUsage as the projector counts it (Go's int64). */
export interface Usage {
  provider: string;
  model: string;
  inputTokens: bigint;
  outputTokens: bigint;
  totalTokens: bigint;
  reasoningTokens: bigint;
  cachedInputTokens: bigint;
  cacheWriteInputTokens: bigint;
}

export function usage(u: Partial<Usage>): Usage {
  return {
    provider: "",
    model: "",
    inputTokens: 0n,
    outputTokens: 0n,
    totalTokens: 0n,
    reasoningTokens: 0n,
    cachedInputTokens: 0n,
    cacheWriteInputTokens: 0n,
    ...u,
  };
}

const wrap = (n: bigint) => BigInt.asIntN(64, n);

/** addUsage sums u's counts into t (int64, wrapping as Go's do). */
export function addUsage(t: Usage, u: Usage): void {
  t.inputTokens = wrap(t.inputTokens + u.inputTokens);
  t.outputTokens = wrap(t.outputTokens + u.outputTokens);
  t.totalTokens = wrap(t.totalTokens + u.totalTokens);
  t.reasoningTokens = wrap(t.reasoningTokens + u.reasoningTokens);
  t.cachedInputTokens = wrap(t.cachedInputTokens + u.cachedInputTokens);
  t.cacheWriteInputTokens = wrap(t.cacheWriteInputTokens + u.cacheWriteInputTokens);
}

export function encodeUsage(u: Usage): string {
  return obj([
    ["provider", omitStr(u.provider)],
    ["model", omitStr(u.model)],
    ["inputTokens", omitInt(u.inputTokens)],
    ["outputTokens", omitInt(u.outputTokens)],
    ["totalTokens", omitInt(u.totalTokens)],
    ["reasoningTokens", omitInt(u.reasoningTokens)],
    ["cachedInputTokens", omitInt(u.cachedInputTokens)],
    ["cacheWriteInputTokens", omitInt(u.cacheWriteInputTokens)],
  ]);
}

export function encodeUsages(us: Usage[] | null | undefined): string | undefined {
  return us && us.length > 0 ? "[" + us.map(encodeUsage).join(",") + "]" : undefined;
}

/** Ev is an event as the projector builds it: JSON fields are JSON text
 * (a Go json.RawMessage), strings Go strings (see json.ts). */
export interface Ev {
  type: EventType;
  threadId?: string;
  runId?: string;
  messageId?: string;
  role?: string;
  toolCallId?: string;
  toolCallName?: string;
  parentMessageId?: string;
  delta?: string;
  content?: string;
  name?: string;
  value?: string | null;
  event?: string | null;
  source?: string;
  message?: string;
  code?: string;
  outcome?: OutcomeType;
  /** The interrupt outcome's interrupts, a JSON array. */
  interrupts?: string;
  result?: string | null;
  usage?: Usage[] | null;
  timestamp?: number;
  metadata?: string | null;
  rawEvent?: string | null;
}

/** encodeEvent is json.Marshal of the Go package's Event. */
export function encodeEvent(e: Ev): string {
  return obj([
    ["type", quote(e.type)],
    ["threadId", omitStr(e.threadId)],
    ["runId", omitStr(e.runId)],
    ["messageId", omitStr(e.messageId)],
    ["role", omitStr(e.role)],
    ["toolCallId", omitStr(e.toolCallId)],
    ["toolCallName", omitStr(e.toolCallName)],
    ["parentMessageId", omitStr(e.parentMessageId)],
    ["delta", omitStr(e.delta)],
    ["content", e.content === undefined ? undefined : quote(e.content)],
    ["name", omitStr(e.name)],
    ["value", omitRaw(e.value)],
    ["event", omitRaw(e.event)],
    ["source", omitStr(e.source)],
    ["message", omitStr(e.message)],
    ["code", omitStr(e.code)],
    ["outcome", e.outcome === undefined ? undefined : obj([["type", quote(e.outcome)], ["interrupts", e.interrupts]])],
    ["result", omitRaw(e.result)],
    ["usage", encodeUsages(e.usage)],
    ["timestamp", omitInt(e.timestamp)],
    ["metadata", omitRaw(e.metadata)],
    ["rawEvent", omitRaw(e.rawEvent)],
  ]);
}

/** The error Position.parse throws for a string that is no position. */
export class BadPositionError extends Error {
  constructor(s: string) {
    super(`bad position: ${JSON.stringify(s)} (want <seq>:<index>)`);
    this.name = "BadPositionError";
  }
}

/** Position names one event of a projection: the stream sequence of the
 * chain message it came from (the last piece's, for a chunked line) and
 * its index among that message's events. Positions only grow along a
 * projection, so one is a resume point: an SSE event's id. */
export class Position {
  readonly seq: bigint;
  readonly index: number;
  constructor(seq: bigint | number = 0n, index = 0) {
    this.seq = BigInt(seq);
    this.index = index;
  }
  /** "<seq>:<index>", e.g. "42:3". */
  toString(): string {
    return `${this.seq}:${this.index}`;
  }
  /** less reports whether this comes before q. */
  less(q: Position): boolean {
    return this.seq < q.seq || (this.seq === q.seq && this.index < q.index);
  }
  /** compare is <0, 0 or >0 as p comes before, is, or comes after q. */
  static compare(p: Position, q: Position): number {
    return p.less(q) ? -1 : q.less(p) ? 1 : 0;
  }
  /** parse reads what toString wrote; it throws BadPositionError. */
  static parse(s: string): Position {
    const m = /^([0-9]+):([0-9]+)$/.exec(s);
    if (m) {
      const seq = BigInt(m[1]!);
      const index = Number(m[2]!);
      if (seq < 1n << 64n && Number.isSafeInteger(index)) return new Position(seq, index);
    }
    throw new BadPositionError(s);
  }
}

/** parsePosition is Position.parse. */
export const parsePosition = (s: string): Position => Position.parse(s);
/** formatPosition is p.toString(). */
export const formatPosition = (p: Position): string => p.toString();
/** comparePosition is Position.compare. */
export const comparePosition = (p: Position, q: Position): number => Position.compare(p, q);
