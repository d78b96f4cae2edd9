package agui

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Dialect is the NDJSON an agent prints on its chain's events subject: a
// profile's `events`.
type Dialect string

// The dialects a projection reads. The empty Dialect sniffs (see
// sniff).
const (
	// DialectClaude is Claude Code's `--output-format stream-json
	// --verbose`, with or without --include-partial-messages, and baton's
	// fake agent, which prints the same.
	DialectClaude Dialect = "claude"
	// DialectCodexExec is `codex exec --json`.
	DialectCodexExec Dialect = "codex-exec"
	// DialectCodexAppServer is `codex app-server`'s JSON-RPC.
	DialectCodexAppServer Dialect = "codex-app-server"
	// DialectRaw translates nothing: every JSON line is a RAW event.
	DialectRaw Dialect = "raw"
)

// ErrUnknownDialect is returned for a name that is no Dialect.
var ErrUnknownDialect = errors.New("unknown dialect")

// Dialects lists every dialect, for messages and documentation.
var Dialects = []Dialect{DialectClaude, DialectCodexExec, DialectCodexAppServer, DialectRaw}

// Valid reports whether d is a dialect, or empty (sniff).
func (d Dialect) Valid() bool {
	switch d {
	case "", DialectClaude, DialectCodexExec, DialectCodexAppServer, DialectRaw:
		return true
	}
	return false
}

// ParseDialect reads a dialect's name; "" is the empty Dialect.
func ParseDialect(s string) (Dialect, error) {
	if d := Dialect(s); d.Valid() {
		return d, nil
	}
	names := make([]string, len(Dialects))
	for i, d := range Dialects {
		names[i] = string(d)
	}
	return "", fmt.Errorf("%w %q (one of %s)", ErrUnknownDialect, s, strings.Join(names, ", "))
}

// claudeTypes are the top-level types of Claude Code's stream-json lines.
var claudeTypes = map[string]bool{
	"system": true, "assistant": true, "user": true, "result": true, "stream_event": true,
	"control_request": true, "control_response": true, "control_cancel_request": true,
}

// sniff names the dialect of an events line that is a JSON object, or
// returns "" when the line does not tell: a "type" Claude Code prints
// means claude; a "type" starting with thread., turn. or item. means
// codex-exec; a "method", or an "id" with a "result" or an "error" and
// no "type", means codex-app-server.
func sniff(line []byte) Dialect {
	var o struct {
		Type   *string         `json:"type"`
		Method *string         `json:"method"`
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(line, &o) != nil {
		return ""
	}
	switch {
	case o.Type != nil && claudeTypes[*o.Type]:
		return DialectClaude
	case o.Type != nil && (strings.HasPrefix(*o.Type, "thread.") || strings.HasPrefix(*o.Type, "turn.") || strings.HasPrefix(*o.Type, "item.")):
		return DialectCodexExec
	case o.Type == nil && (o.Method != nil || o.ID != nil && (o.Result != nil || o.Error != nil)):
		return DialectCodexAppServer
	}
	return ""
}
