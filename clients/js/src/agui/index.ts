// The AG-UI projection of a baton run's chain: the TypeScript port of
// the Go package github.com/batonhq/baton/agui (its doc.go is the spec).
// The same chain gives the same events, ids, positions and JSON bytes as
// the Go one: both are checked against agui/testdata's golden files.
//
//   const p = new Projector(runId, { dialect: "claude", after: Position.parse(lastEventId) });
//   for (const m of messages) // the chain, in order: {kind, seq, headers, data, time}
//     for (const { pos, event, json } of p.project(m)) send(pos.toString(), json);
//
// event is the AG-UI event as an object; json is the Go package's
// encoding of it (goBytes(json) its exact bytes, which differ from
// TextEncoder's only where the agent printed invalid UTF-8 inside JSON).
// state() is the Go package's State, byte for byte; restore() takes
// either's.

export {
  BadStateError,
  DefaultMaxLine,
  type Headers,
  type Message,
  type Projected,
  Projector,
  type ProjectorOptions,
} from "./projector.js";
export {
  BadPositionError,
  comparePosition,
  type Event,
  type Interrupt,
  EventType,
  formatPosition,
  type OutcomeType,
  parsePosition,
  Position,
  type TokenUsage,
} from "./event.js";
export {
  type Dialect,
  DialectClaude,
  DialectCodexAppServer,
  DialectCodexExec,
  DialectRaw,
  Dialects,
  parseDialect,
  UnknownDialectError,
  validDialect,
} from "./dialect.js";
export { goBytes } from "./json.js";
export { type ApproveRequest, BadResumeError, type ResumeEntry, resumeApproval } from "./approval.js";
export { messageOf, type WatchedEvent } from "./watched.js";
