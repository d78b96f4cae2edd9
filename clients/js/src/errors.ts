// Typed errors, one class per sentinel of the Go client (client/*.go):
// test with instanceof, or by the stable `code`.

/** Every error the client throws on purpose is a BatonError. */
export class BatonError extends Error {
  /** A stable machine-readable code, e.g. "not_found". */
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** No run (or session) has the given id. Go: client.ErrNotFound. */
export class NotFoundError extends BatonError {
  constructor(message: string) {
    super("not_found", message);
  }
}

/** The run has already ended (or its stdin was closed). Go: client.ErrTerminal. */
export class TerminalError extends BatonError {
  constructor(message: string) {
    super("terminal", message);
  }
}

/**
 * No worker answered a request in time (a cancel, an input, a read through
 * the relay): none is running, or all restart. Go: client.ErrNoWorker.
 */
export class NoWorkerError extends BatonError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("no_worker", message, options);
  }
}

/**
 * The stream already held a job with this runId within its duplicates
 * window: the run was submitted before and starts once. Go:
 * client.ErrDuplicate.
 */
export class DuplicateError extends BatonError {
  readonly stream: string;
  readonly seq: number;
  constructor(message: string, stream: string, seq: number) {
    super("duplicate", message);
    this.stream = stream;
    this.seq = seq;
  }
}

/**
 * A chunked line cannot be put back together: a malformed Baton-Chunk
 * header, a piece missing or out of order, or a line larger than the
 * client's limit. Go: client.ErrBrokenChunk.
 */
export class BrokenChunkError extends BatonError {
  constructor(message: string) {
    super("broken_chunk", message);
  }
}

/** The run takes no input (its profile has stdin "once"). Go: client.ErrNoInput. */
export class NoInputError extends BatonError {
  constructor(message: string) {
    super("no_input", message);
  }
}

/** An input message is over the workers' maxInputBytes. Go: client.ErrTooLarge. */
export class TooLargeError extends BatonError {
  constructor(message: string) {
    super("too_large", message);
  }
}

/** The run has no terminal status yet, so nothing is captured. Go: client.ErrNotEnded. */
export class NotEndedError extends BatonError {
  constructor(message: string) {
    super("not_ended", message);
  }
}

/**
 * An output read from the store is not what the run's terminal status
 * lists (size or SHA-256). Go: client.ErrDigest.
 */
export class DigestError extends BatonError {
  constructor(message: string) {
    super("digest", message);
  }
}

/**
 * The read relay did not answer as it should: a refusal, or a message that
 * is not part of a page. Go: client.ErrRelay. (No answer at all is a
 * NoWorkerError.)
 */
export class RelayError extends BatonError {
  /** The Nats-Service-Error-Code of a refusal, "" otherwise. */
  readonly serviceCode: string;
  constructor(message: string, serviceCode = "", options?: { cause?: unknown }) {
    super("relay", message, options);
    this.serviceCode = serviceCode;
  }
}

/**
 * A worker refused a request with a code the client has no class for
 * (400 a bad runId, 503 try again). Go: the "refused (CODE)" error.
 */
export class RefusedError extends BatonError {
  readonly serviceCode: string;
  constructor(message: string, serviceCode: string) {
    super("refused", message);
    this.serviceCode = serviceCode;
  }
}

/**
 * A job, runId or session id that would be rejected for its own content,
 * never sent. Go: protocol.ErrBadRunID, protocol.ErrInvalidJob.
 */
export class InvalidError extends BatonError {
  constructor(message: string) {
    super("invalid", message);
  }
}

/** The workspaces stream is full (workspacesMaxBytes). Go: client.ErrWorkspacesFull. */
export class WorkspacesFullError extends BatonError {
  constructor(message: string) {
    super("workspaces_full", message);
  }
}

/** A session's fork names a session id that is taken. Go: client.ErrSessionExists. */
export class SessionExistsError extends BatonError {
  constructor(message: string) {
    super("session_exists", message);
  }
}

/** The session has a live run. Go: client.ErrSessionLive. */
export class SessionLiveError extends BatonError {
  constructor(message: string) {
    super("session_live", message);
  }
}

/** The caller's AbortSignal ended the call. */
export class AbortedError extends BatonError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("aborted", message, options);
  }
}

/**
 * A JetStream publish the server refused or did not answer: code and
 * errCode are the API error's (e.g. 10071 wrong last sequence).
 */
export class JetStreamError extends BatonError {
  readonly apiCode: number;
  readonly errCode: number;
  readonly description: string;
  constructor(message: string, apiCode: number, errCode: number, description: string, cause?: unknown) {
    super("jetstream", message, { cause });
    this.apiCode = apiCode;
    this.errCode = errCode;
    this.description = description;
  }
}

