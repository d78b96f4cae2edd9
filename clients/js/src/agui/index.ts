// The AG-UI projection of a baton run's chain: the TypeScript port of
// the Go package github.com/batonhq/baton/agui (its doc.go is the spec).
// The same chain gives the same events, ids, positions and JSON bytes as
// the Go one: both are checked against agui/testdata's golden files.

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
