package fakeagent

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"unicode/utf8"
)

// workspace is the cwd the init event reports. It is fixed, not os.Getwd,
// so the output depends on the options alone.
const workspace = "/workspace"

var models = [...]string{"claude-sonnet-4-5-20250929", "claude-opus-4-1-20250805", "claude-haiku-4-5-20251001"}

var tools = [...]string{"Task", "Bash", "Glob", "Grep", "LS", "Read", "Edit", "MultiEdit", "Write", "WebFetch", "TodoWrite", "WebSearch"}

// The frame of a text-delta line around its text; LineSize pads the text.
const (
	deltaPrefix = `{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`
	deltaSuffix = `"}}}`
	deltaFrame  = len(deltaPrefix) + len(deltaSuffix) + 1 // + newline
)

// One session, told in order: each step is what the assistant says, then
// the tool call it announced (none for the closing message). A stream
// longer than the story tells it again from the start.
type storyStep struct {
	text   string // what the assistant says, streamed as text deltas
	name   string // the tool it calls; "" for a closing message
	input  any    // the tool's input, encoded as a JSON object
	result string // the tool's result
	isErr  bool   // the tool failed
}

// step is a story step, JSON-encoded ahead of time.
type step struct {
	tokens  []token // the text, a word (with its leading space) per token
	text    string  // the whole text, encoded
	name    string
	input   string // JSON object
	result  string // encoded string content
	isError bool
}

// token is one piece of narration, JSON-encoded without quotes.
type token struct {
	s     string
	plain bool // ASCII without escapes: any prefix is valid string content
}

var (
	steps         []step
	followUpSteps []step  // the second turn (Options.FollowUp)
	tokens        []token // every step's text in order, for fixed-size deltas
)

// The results' summaries of the story and of its follow-up turn.
const (
	storySummary    = "I changed the upload handler to answer 400 for a malformed body instead of 500 and updated its test. `go test ./...` passes."
	followUpSummary = "I added `TestHandleUploadMalformedBody`, which posts a body that is not JSON and expects a 400. `go test ./internal/server/` passes."
)

func story() []storyStep {
	type bash struct {
		Command     string `json:"command"`
		Description string `json:"description"`
	}
	type read struct {
		FilePath string `json:"file_path"`
	}
	type edit struct {
		FilePath  string `json:"file_path"`
		OldString string `json:"old_string"`
		NewString string `json:"new_string"`
	}
	type grep struct {
		Pattern    string `json:"pattern"`
		Path       string `json:"path"`
		OutputMode string `json:"output_mode"`
	}
	handler := workspace + "/internal/server/handler.go"
	return []storyStep{
		{"I'll start by reading the upload handler, to see how it answers a request whose body is not valid JSON.",
			"Read", read{handler},
			"     1→package server\n     2→\n     3→import (\n     4→\t\"encoding/json\"\n     5→\t\"net/http\"\n     6→)\n     7→\n     8→func (s *Server) handleUpload(w http.ResponseWriter, r *http.Request) {\n     9→\tvar req uploadRequest\n    10→\tif err := json.NewDecoder(r.Body).Decode(&req); err != nil {\n    11→\t\thttp.Error(w, err.Error(), http.StatusInternalServerError)\n    12→\t\treturn\n    13→\t}\n", false},
		{"The decoder's error is answered with a 500, but a malformed body is the client's fault. Let me run the failing test to see what it expects.",
			"Bash", bash{"go test ./internal/server/ -run TestHandleUpload", "Run the failing test"},
			"--- FAIL: TestHandleUpload (0.01s)\n    handler_test.go:44: status = 500, want 400\nFAIL\nFAIL\tgithub.com/acme/shop/internal/server\t0.214s\nFAIL", true},
		{"The test expects a 400, as I thought. Before changing it, I'll check whether anything else in the code answers a 500 for bad input.",
			"Grep", grep{"StatusInternalServerError", workspace + "/internal", "files_with_matches"},
			"Found 1 file\n" + handler, false},
		{"Only the upload handler does, so the change stays in one place. I'll make it answer 400 Bad Request for a malformed body.",
			"Edit", edit{handler, "http.Error(w, err.Error(), http.StatusInternalServerError)", "http.Error(w, err.Error(), http.StatusBadRequest)"},
			"The file " + handler + " has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n    10→\tif err := json.NewDecoder(r.Body).Decode(&req); err != nil {\n    11→\t\thttp.Error(w, err.Error(), http.StatusBadRequest)\n    12→\t\treturn", false},
		{"Now I'll run the whole suite, to make sure that nothing else depended on the old status code.",
			"Bash", bash{"go test ./...", "Run the test suite"},
			"ok  \tgithub.com/acme/shop/internal/server\t0.198s\nok  \tgithub.com/acme/shop/internal/store\t0.102s", false},
		{"Every test passes: the `TestHandleUpload` failure is gone, and a malformed upload now gets a 400 instead of a 500.",
			"", nil, "", false},
	}
}

// followUpStory is the second turn (Options.FollowUp), answering "add a
// regression test for the malformed body".
func followUpStory() []storyStep {
	type bash struct {
		Command     string `json:"command"`
		Description string `json:"description"`
	}
	type edit struct {
		FilePath  string `json:"file_path"`
		OldString string `json:"old_string"`
		NewString string `json:"new_string"`
	}
	test := workspace + "/internal/server/handler_test.go"
	return []storyStep{
		{"Good idea: a test of its own keeps the 400 from turning back into a 500. I'll add one that posts a body which is not JSON.",
			"Edit", edit{test, "func TestHandleUpload(t *testing.T) {",
				"func TestHandleUploadMalformedBody(t *testing.T) {\n\trec := httptest.NewRecorder()\n\tnewTestServer(t).handleUpload(rec, httptest.NewRequest(\"POST\", \"/upload\", strings.NewReader(\"{not json\")))\n\tif rec.Code != http.StatusBadRequest {\n\t\tt.Errorf(\"status = %d, want 400\", rec.Code)\n\t}\n}\n\nfunc TestHandleUpload(t *testing.T) {"},
			"The file " + test + " has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n    30→func TestHandleUploadMalformedBody(t *testing.T) {\n    31→\trec := httptest.NewRecorder()", false},
		{"Now I'll run the server package's tests, the new one included.",
			"Bash", bash{"go test ./internal/server/ -v -run TestHandleUpload", "Run the upload handler's tests"},
			"=== RUN   TestHandleUploadMalformedBody\n--- PASS: TestHandleUploadMalformedBody (0.00s)\n=== RUN   TestHandleUpload\n--- PASS: TestHandleUpload (0.01s)\nPASS\nok  \tgithub.com/acme/shop/internal/server\t0.187s", false},
		{"Both tests pass: `TestHandleUploadMalformedBody` now guards the 400 for a malformed body.",
			"", nil, "", false},
	}
}

func init() {
	for _, st := range story() {
		s := encodeStep(st)
		if len(tokens) > 0 {
			tokens = append(tokens, token{s: ` `, plain: true})
		}
		tokens = append(tokens, s.tokens...)
		steps = append(steps, s)
	}
	for _, st := range followUpStory() {
		followUpSteps = append(followUpSteps, encodeStep(st))
	}
}

func encodeStep(st storyStep) step {
	s := step{name: st.name, text: string(appendJSONString(nil, st.text)), isError: st.isErr,
		result: string(appendJSONString(nil, st.result))}
	for j, w := range strings.Fields(st.text) {
		if j > 0 {
			w = " " + w
		}
		e := string(appendJSONString(nil, w))
		plain := e == w && strings.IndexFunc(w, func(r rune) bool { return r >= utf8.RuneSelf }) < 0
		s.tokens = append(s.tokens, token{s: e, plain: plain})
	}
	if st.input != nil {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(st.input); err != nil {
			panic(err) // plain structs always encode
		}
		s.input = strings.TrimSuffix(b.String(), "\n")
	}
	return s
}

// Phases of one assistant turn, in stream order.
const (
	phaseMessageStart = iota
	phaseBlockStart
	phaseDelta
	phaseBlockStop
	phaseAssistant
	phaseMessageDelta
	phaseMessageStop
	phaseToolResult
)

// generator builds the lines of one stream into a reused buffer: each method
// returns the line, newline included, valid until the next call.
type generator struct {
	rng      *rand.PCG
	buf      []byte
	lineSize int
	session  []byte
	model    string

	phase      int
	deltasLeft int // fixed-size deltas left in this message (LineSize)
	cursor     int // next token of tokens (LineSize)
	next       int // the story step of the next message
	word       int // next token of the step's text
	msgID      []byte
	toolID     []byte
	step       *step
	steps      []step // the turn being told: steps, or followUpSteps
	summary    string // the turn's result text
	turns      int
	msgOutput  int

	// Token totals for the result's usage and cost.
	input, cacheCreation, cacheRead, output int
}

func newGenerator(seed int64, lineSize int) *generator {
	g := &generator{
		rng:      rand.NewPCG(uint64(seed), 0x62_61_74_6f_6e), // "baton"
		buf:      make([]byte, 0, max(lineSize, 1024)),
		lineSize: lineSize,
		steps:    steps,
		summary:  storySummary,
	}
	g.session = g.appendUUID(nil)
	g.model = models[g.intn(len(models))]
	return g
}

func (g *generator) intn(n int) int { return int(g.rng.Uint64() % uint64(n)) }

func (g *generator) line() []byte {
	g.buf = append(g.buf, '\n')
	return g.buf
}

func (g *generator) initLine(prompt []byte, echo bool) []byte {
	b := append(g.buf[:0], `{"type":"system","subtype":"init","cwd":"`+workspace+`","session_id":"`...)
	b = append(b, g.session...)
	b = append(b, `","tools":[`...)
	for i, t := range tools {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, t...)
		b = append(b, '"')
	}
	b = append(b, `],"mcp_servers":[],"model":"`...)
	b = append(b, g.model...)
	b = append(b, `","permissionMode":"bypassPermissions","apiKeySource":"none","output_style":"default","uuid":"`...)
	b = g.appendUUID(b)
	b = append(b, '"')
	if echo {
		b = append(b, `,"prompt":"`...)
		b = appendJSONString(b, string(prompt))
		b = append(b, '"')
	}
	g.buf = append(b, '}')
	return g.line()
}

// event returns the next line of the current turn.
func (g *generator) event() []byte {
	b := g.buf[:0]
	switch g.phase {
	case phaseMessageStart:
		g.msgID = g.appendID(g.msgID[:0], "msg_01")
		g.turns++
		in, created := 3+g.intn(6), 100+g.intn(1900)
		g.input += in
		g.cacheCreation += created
		g.cacheRead += 12000 + 1500*g.turns
		b = append(b, `{"type":"stream_event","event":{"type":"message_start","message":{"id":"`...)
		b = append(b, g.msgID...)
		b = append(b, `","type":"message","role":"assistant","model":"`...)
		b = append(b, g.model...)
		b = append(b, `","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":`...)
		b = strconv.AppendInt(b, int64(in), 10)
		b = append(b, `,"cache_creation_input_tokens":`...)
		b = strconv.AppendInt(b, int64(created), 10)
		b = append(b, `,"cache_read_input_tokens":`...)
		b = strconv.AppendInt(b, int64(12000+1500*g.turns), 10)
		b = append(b, `,"output_tokens":1,"service_tier":"standard"}}}}`...)
		g.phase = phaseBlockStart
	case phaseBlockStart:
		b = append(b, `{"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}}`...)
		g.step = &g.steps[g.next%len(g.steps)]
		g.next++
		g.word = 0
		g.deltasLeft = 8 + g.intn(17)
		g.msgOutput = 0
		g.phase = phaseDelta
	case phaseDelta:
		b = append(b, deltaPrefix...)
		if g.lineSize > 0 {
			// Sized lines (benchmarks) carry the story's words cut to size.
			b = g.appendText(b, max(g.lineSize-deltaFrame, 1))
			g.deltasLeft--
		} else {
			// A few words at a time, so the deltas join into the step's text.
			for n := 1 + g.intn(3); n > 0 && g.word < len(g.step.tokens); n-- {
				b = append(b, g.step.tokens[g.word].s...)
				g.word++
			}
		}
		b = append(b, deltaSuffix...)
		g.msgOutput += 2
		g.output += 2
		if g.deltasLeft == 0 || (g.lineSize == 0 && g.word == len(g.step.tokens)) {
			g.phase = phaseBlockStop
		}
	case phaseBlockStop:
		b = append(b, `{"type":"stream_event","event":{"type":"content_block_stop","index":0}}`...)
		g.phase = phaseAssistant
	case phaseAssistant:
		g.msgOutput += 30
		g.output += 30
		b = append(b, `{"type":"assistant","message":{"id":"`...)
		b = append(b, g.msgID...)
		b = append(b, `","type":"message","role":"assistant","model":"`...)
		b = append(b, g.model...)
		b = append(b, `","content":[{"type":"text","text":"`...)
		b = append(b, g.step.text...)
		b = append(b, '"', '}')
		if g.step.name != "" {
			g.toolID = g.appendID(g.toolID[:0], "toolu_01")
			b = append(b, `,{"type":"tool_use","id":"`...)
			b = append(b, g.toolID...)
			b = append(b, `","name":"`...)
			b = append(b, g.step.name...)
			b = append(b, `","input":`...)
			b = append(b, g.step.input...)
			b = append(b, '}')
		}
		b = append(b, `],"stop_reason":"`...)
		b = append(b, g.stopReason()...)
		b = append(b, `","stop_sequence":null,"usage":{"input_tokens":`...)
		b = strconv.AppendInt(b, int64(g.input), 10)
		b = append(b, `,"cache_creation_input_tokens":`...)
		b = strconv.AppendInt(b, int64(g.cacheCreation), 10)
		b = append(b, `,"cache_read_input_tokens":`...)
		b = strconv.AppendInt(b, int64(g.cacheRead), 10)
		b = append(b, `,"output_tokens":`...)
		b = strconv.AppendInt(b, int64(g.msgOutput), 10)
		b = append(b, `,"service_tier":"standard"}},"parent_tool_use_id":null,"session_id":"`...)
		b = g.appendTail(b)
		g.phase = phaseMessageDelta
	case phaseMessageDelta:
		b = append(b, `{"type":"stream_event","event":{"type":"message_delta","delta":{"stop_reason":"`...)
		b = append(b, g.stopReason()...)
		b = append(b, `","stop_sequence":null},"usage":{"output_tokens":`...)
		b = strconv.AppendInt(b, int64(g.msgOutput), 10)
		b = append(b, `}}}`...)
		g.phase = phaseMessageStop
	case phaseMessageStop:
		b = append(b, `{"type":"stream_event","event":{"type":"message_stop"}}`...)
		g.phase = phaseToolResult
		if g.step.name == "" {
			g.phase = phaseMessageStart
		}
	case phaseToolResult:
		b = append(b, `{"type":"user","message":{"role":"user","content":[{"tool_use_id":"`...)
		b = append(b, g.toolID...)
		b = append(b, `","type":"tool_result","content":"`...)
		b = append(b, g.step.result...)
		b = append(b, `","is_error":`...)
		b = strconv.AppendBool(b, g.step.isError)
		b = append(b, `}]},"parent_tool_use_id":null,"session_id":"`...)
		b = g.appendTail(b)
		g.phase = phaseMessageStart
	}
	g.buf = b
	return g.line()
}

// appendTail ends an assistant or user line: session id, uuid, closing brace.
func (g *generator) appendTail(b []byte) []byte {
	b = append(b, g.session...)
	b = append(b, `","uuid":"`...)
	b = g.appendUUID(b)
	return append(b, `"}`...)
}

// stopReason is why the current message ends: a tool call, or the turn's end.
func (g *generator) stopReason() string {
	if g.step.name == "" {
		return "end_turn"
	}
	return "tool_use"
}

// told reports whether the story has been told once, to its closing
// message: the stream may end there.
func (g *generator) told() bool {
	return g.next >= len(g.steps) && g.phase == phaseMessageStart
}

// followUp starts the second turn: the follow-up story, told once.
func (g *generator) followUp() {
	g.steps, g.next, g.summary = followUpSteps, 0, followUpSummary
}

// appendText appends exactly n bytes of encoded narration.
func (g *generator) appendText(b []byte, n int) []byte {
	for n > 0 {
		t := tokens[g.cursor]
		g.cursor = (g.cursor + 1) % len(tokens)
		switch {
		case len(t.s) <= n:
			b = append(b, t.s...)
			n -= len(t.s)
		case t.plain:
			b = append(b, t.s[:n]...)
			n = 0
		default:
			// An escape cannot be cut; spaces fill what is left.
			for ; n > 0; n-- {
				b = append(b, ' ')
			}
		}
	}
	return b
}

// rawLine is a non-JSON line, like the progress or debug output agents mix
// into stdout. n and last give the progress; in Duration mode last is unknown.
func (g *generator) rawLine(n, last int, endless bool) []byte {
	b := g.buf[:0]
	switch g.intn(3) {
	case 0:
		pct := n % 100
		if !endless {
			pct = n * 100 / last
		}
		b = append(b, "progress: "...)
		b = strconv.AppendInt(b, int64(pct), 10)
		b = append(b, '%')
	case 1:
		b = append(b, "[debug] api request 200 in "...)
		b = strconv.AppendInt(b, int64(200+g.intn(2800)), 10)
		b = append(b, "ms"...)
	default:
		b = append(b, "Warning: tool output truncated to 30000 characters"...)
	}
	g.buf = b
	return g.line()
}

// forgedSentinel looks like baton's journal sentinel (journal.Sentinel) but
// carries a nonce the agent made up, as a hostile agent would.
func (g *generator) forgedSentinel() []byte {
	b := append(g.buf[:0], `{"__exit":0,"__nonce":"`...)
	b = g.appendHex(b, 16)
	g.buf = append(b, `","reason":"exit"}`...)
	return g.line()
}

// resultLine is the final result event, line n of the stream.
func (g *generator) resultLine(n int, o Options, failed bool) []byte {
	var ms int64
	switch {
	case o.Duration > 0:
		ms = o.Duration.Milliseconds()
	case o.Rate > 0:
		ms = int64(float64(n-1) / o.Rate * 1000)
	default:
		ms = int64(n*7 + g.intn(500))
	}
	turns := max(g.turns, 1)
	cost := (float64(g.input)*3 + float64(g.cacheCreation)*3.75 + float64(g.cacheRead)*0.3 + float64(g.output)*15) / 1e6
	b := append(g.buf[:0], `{"type":"result","subtype":"`...)
	if failed {
		b = append(b, `error_during_execution","is_error":true`...)
	} else {
		b = append(b, `success","is_error":false`...)
	}
	b = append(b, `,"duration_ms":`...)
	b = strconv.AppendInt(b, ms, 10)
	b = append(b, `,"duration_api_ms":`...)
	b = strconv.AppendInt(b, ms*9/10, 10)
	b = append(b, `,"num_turns":`...)
	b = strconv.AppendInt(b, int64(turns), 10)
	b = append(b, `,"result":"`...)
	switch {
	case !failed:
		b = append(b, g.summary...)
	case o.Signal != "":
		b = append(b, "Execution interrupted by signal "...)
		b = append(b, o.Signal...)
	default:
		b = append(b, "Execution failed with exit status "...)
		b = strconv.AppendInt(b, int64(o.ExitCode), 10)
	}
	b = append(b, `","session_id":"`...)
	b = append(b, g.session...)
	b = append(b, `","total_cost_usd":`...)
	b = strconv.AppendFloat(b, cost, 'f', 6, 64)
	b = append(b, `,"usage":{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(g.input), 10)
	b = append(b, `,"cache_creation_input_tokens":`...)
	b = strconv.AppendInt(b, int64(g.cacheCreation), 10)
	b = append(b, `,"cache_read_input_tokens":`...)
	b = strconv.AppendInt(b, int64(g.cacheRead), 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, int64(g.output), 10)
	b = append(b, `,"server_tool_use":{"web_search_requests":0},"service_tier":"standard"},"permission_denials":[],"uuid":"`...)
	b = g.appendUUID(b)
	g.buf = append(b, `"}`...)
	return g.line()
}

const hexDigits = "0123456789abcdef"

// appendHex appends n random bytes as 2n hex digits.
func (g *generator) appendHex(b []byte, n int) []byte {
	for ; n > 0; n -= 8 {
		r := g.rng.Uint64()
		for i := range min(n, 8) {
			c := byte(r >> (8 * i))
			b = append(b, hexDigits[c>>4], hexDigits[c&15])
		}
	}
	return b
}

// appendUUID appends a random version-4 UUID.
func (g *generator) appendUUID(b []byte) []byte {
	var u [16]byte
	r1, r2 := g.rng.Uint64(), g.rng.Uint64()
	for i := range 8 {
		u[i], u[8+i] = byte(r1>>(8*i)), byte(r2>>(8*i))
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hexDigits[c>>4], hexDigits[c&15])
	}
	return b
}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// appendID appends prefix and 22 base62 characters, the shape of Anthropic
// message and tool-use ids.
func (g *generator) appendID(b []byte, prefix string) []byte {
	b = append(b, prefix...)
	for i := 0; i < 22; i += 10 {
		r := g.rng.Uint64()
		for range min(22-i, 10) {
			b = append(b, base62[r%62])
			r /= 62
		}
	}
	return b
}

// appendJSONString appends s encoded as the content of a JSON string
// (without quotes). s must be valid UTF-8; bytes >= 0x80 pass unchanged.
func appendJSONString(b []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
		}
		start = i + 1
	}
	return append(b, s[start:]...)
}
