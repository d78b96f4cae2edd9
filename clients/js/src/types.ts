// The protocol's JSON and record shapes (docs/protocol.md).

/** A job (docs/protocol.md, Submitting a run). Unknown fields are refused by the workers. */
export interface Job {
  runId: string;
  profile: string;
  input?: string;
  args?: string[];
  env?: Record<string, string>;
  /** "90s", "10m", or a number of seconds. */
  timeout?: string | number;
  files?: Record<string, string>;
  labels?: Record<string, string>;
  retries?: number;
  limits?: { output?: string; disk?: string; outputs?: string };
  outputs?: { diff?: boolean; files?: string[] };
  /**
   * Seed the workspace from an archive of the workspaces stream (putWorkspace's name), or
   * clone a repository into it (https, no credential in the URL: a profile secret holds it).
   */
  workspace?: { object: string } | { git: { url: string; ref?: string; depth?: number } };
  session?: string;
}

export type StatusType =
  | "started" | "attached" | "handoff" | "waiting" | "running"
  | "succeeded" | "failed" | "cancelled" | "timeout" | "lost" | "paused";

const terminal = new Set<string>(["succeeded", "failed", "cancelled", "timeout", "lost", "paused"]);

/** Reports whether a status ends its run. */
export function isTerminal(status: string): boolean {
  return terminal.has(status);
}

/** One stored output of a run, as its terminal status lists it. */
export interface Output {
  name: string;
  /** A file's workspace path, escaped; absent for the diff. */
  path?: string;
  size: number;
  /** "SHA-256=" and the base64url of the sum. */
  digest: string;
}

export interface Checkpoint {
  object: string;
  digest: string;
  size: number;
  files: number;
  treeBytes: number;
  base?: boolean;
  run?: string;
  created?: string;
  [k: string]: unknown;
}

/** A lifecycle status (the payload of baton.runs.<runId>.status). */
export interface Status {
  status: StatusType;
  runId: string;
  worker?: string;
  node?: string;
  epoch?: number;
  offset: number;
  attempt?: number;
  exitCode?: number;
  signal?: string;
  stderrTail?: string;
  reason?: string;
  retriedAs?: string;
  time: string;
  outputs?: Output[];
  outputsError?: string;
  outputsNotes?: string[];
  session?: string;
  checkpoint?: Checkpoint;
  checkpointError?: string;
}

/**
 * A connection the run's egress proxy decided (the payload of
 * baton.runs.<runId>.egress; Go: journal.Egress, docs/protocol.md#egress).
 * A run's last one may be a note instead: no more of its egress is recorded.
 */
export interface Egress {
  start?: string;
  host?: string;
  port?: number;
  /** CONNECT for a tunnel, else the forwarded request's method (DNS for a refused query). */
  method?: string;
  allowed: boolean;
  /** Why it was refused, or why an allowed one failed. */
  reason?: string;
  /** The names of the secrets swapped into the request, if any. */
  secret: string;
  bytesOut: number;
  bytesIn: number;
  durationMs: number;
  note?: string;
}

/**
 * A host tool call (phase "call", with its args) or its answer (phase
 * "result", with its result or error): the payload of
 * baton.runs.<runId>.tool (Go: protocol.ToolMessage, docs/tools.md).
 */
export interface ToolMessage {
  /** The call's number in its run, from 1. */
  call: number;
  phase: "call" | "result";
  name: string;
  /** On a call: its arguments, as the agent wrote them. */
  args?: Record<string, unknown>;
  /** On an answer: the tool's answer, as text. */
  result?: string;
  /** On an answer: why there is none. */
  error?: string;
  /** The chain holds only the start of it (the agent got all of it). */
  truncated?: boolean;
}

/** A cancel's answer. */
export interface CancelReply {
  runId: string;
  state: string;
  node: string;
  worker?: string;
}

/** An input's or interrupt's answer: seq is the message's sequence in the input stream. */
export interface InputReply {
  runId: string;
  seq: number;
}

export interface SessionSendReply {
  session: string;
  runId: string;
  started: boolean;
  seq?: number;
}

/** A run's record (kv.RunRecord), read through the relay. Durations are in nanoseconds. */
export interface RunRecord {
  runId: string;
  state: string;
  node: string;
  worker?: string;
  profile: string;
  attempt: number;
  deadline?: Date;
  cancelRequested?: boolean;
  interactive?: boolean;
  turnEndField?: string;
  turnEndEquals?: string;
  /** The profile's events dialect, for the AG-UI projection (`@batonhq/client/agui`). */
  events?: string;
  idleTimeout?: number;
  /** The run's policy for permission prompts (the profile's, narrowed by the job's), and how long an ask waits for a person. */
  policy?: { default?: string; allow?: string[]; ask?: string[]; deny?: string[] };
  askTimeout?: number;
  waitingSince?: Date;
  createdAt: Date;
  startedAt?: Date;
  finishedAt?: Date;
  exitCode?: number;
  reason?: string;
  offset: number;
  lastSeq: number;
  labels?: Record<string, string>;
  retries?: number;
  /** The job as submitted (JSON bytes), unless it was too large to keep. */
  job?: Uint8Array;
  input?: string;
  pauseAfter?: number;
  pauseRequested?: boolean;
  session?: string;
  checkpoint?: Record<string, unknown>;
  spawning?: boolean;
  [k: string]: unknown;
}

/** A session's record (kv.SessionRecord). */
export interface SessionRecord {
  id: string;
  profile: string;
  state: string;
  live?: string;
  liveSince?: Date;
  runs?: string[];
  runCount: number;
  checkpoints?: Record<string, unknown>[];
  labels?: Record<string, string>;
  deleted?: boolean;
  createdAt: Date;
  updatedAt: Date;
  [k: string]: unknown;
}
