package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// ProtocolVersion is the MCP revision the server speaks.
const ProtocolVersion = "2024-11-05"

// DefaultMaxLine bounds one message from the client: a tool's arguments
// are bounded far below it (the profile's toolLimits.bytes).
const DefaultMaxLine = 1 << 20

// maxInFlight bounds the calls one client has waiting at once.
const maxInFlight = 16

// JSON-RPC error codes.
const (
	codeParse          = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternal       = -32603
)

// ErrUnknownTool: the tool is not one of the run's; the call is refused
// without leaving the sandbox's side.
var ErrUnknownTool = errors.New("unknown tool")

// Tool is one tool as tools/list shows it.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// Backend lists and calls the tools. Call returns the tool's answer, or
// an error: ErrUnknownTool (wrapped) becomes a JSON-RPC error, any other
// a result with isError, its text the error's, for the model to read.
type Backend interface {
	List(ctx context.Context) ([]Tool, error)
	Call(ctx context.Context, name string, args json.RawMessage) (string, error)
}

// Option sets a Server option.
type Option func(*Server)

// WithMaxLine sets the longest message the server reads (default
// DefaultMaxLine); a longer one is answered with a parse error and
// skipped.
func WithMaxLine(n int) Option { return func(s *Server) { s.maxLine = n } }

// WithVersion sets the version serverInfo reports.
func WithVersion(v string) Option { return func(s *Server) { s.version = v } }

// Server answers one MCP client.
type Server struct {
	b       Backend
	maxLine int
	version string
	mu      sync.Mutex // one message written at a time
	w       io.Writer
}

// NewServer returns a server of b's tools.
func NewServer(b Backend, opts ...Option) *Server {
	s := &Server{b: b, maxLine: DefaultMaxLine, version: "dev"}
	for _, o := range opts {
		o(s)
	}
	return s
}

// request is a JSON-RPC request or notification (no id).
type request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// Serve answers the messages read from r on w until r ends (nil) or
// fails, or ctx ends. Calls run concurrently, at most maxInFlight; Serve
// returns once every answer is written.
func (s *Server) Serve(ctx context.Context, r io.Reader, w io.Writer) error {
	s.w = w
	br := bufio.NewReaderSize(r, 64<<10)
	slots := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		line, tooLong, err := readLine(br, s.maxLine)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if tooLong {
			s.write(response{ID: nil, Error: &rpcError{codeParse, fmt.Sprintf("message longer than %d bytes", s.maxLine)}})
			continue
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		req, rerr := parseRequest(line)
		if rerr != nil {
			s.write(response{ID: req.ID, Error: rerr})
			continue
		}
		if req.Method == "tools/call" && req.ID != nil {
			select {
			case slots <- struct{}{}:
			default:
				s.write(response{ID: req.ID, Error: &rpcError{codeInternal, fmt.Sprintf("more than %d calls at once", maxInFlight)}})
				continue
			}
			wg.Go(func() {
				defer func() { <-slots }()
				s.answer(ctx, req)
			})
			continue
		}
		s.answer(ctx, req)
	}
}

// readLine reads one line without its '\n'; a line over limit is skipped
// to its end and reported tooLong. A last line without '\n' counts.
func readLine(r *bufio.Reader, limit int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > limit+1 {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		switch {
		case err == nil:
			return bytes.TrimSuffix(line, []byte("\n")), tooLong, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && (len(line) > 0 || tooLong):
			return line, tooLong, nil
		default:
			return nil, false, err
		}
	}
}

// parseRequest decodes one message; on error, the request holds the id
// when one could be read.
func parseRequest(line []byte) (request, *rpcError) {
	var req request
	if line[0] == '[' {
		return req, &rpcError{codeInvalidRequest, "batches are not supported"}
	}
	if err := json.Unmarshal(line, &req); err != nil {
		var m map[string]json.RawMessage
		if json.Unmarshal(line, &m) != nil {
			return request{}, &rpcError{codeParse, "not JSON: " + err.Error()}
		}
		return request{ID: validID(m["id"])}, &rpcError{codeInvalidRequest, err.Error()}
	}
	req.ID = validID(req.ID)
	switch {
	case req.JSONRPC != "2.0":
		return req, &rpcError{codeInvalidRequest, `jsonrpc must be "2.0"`}
	case req.Method == "":
		return req, &rpcError{codeInvalidRequest, "no method"}
	}
	return req, nil
}

// validID is id when it is a JSON-RPC id (a string or a number), else nil
// (null on the wire; a request with no id is a notification).
func validID(id json.RawMessage) json.RawMessage {
	id = bytes.TrimSpace(id)
	if len(id) == 0 {
		return nil
	}
	switch id[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return id
	}
	return nil
}

// answer handles one request; a notification gets no answer.
func (s *Server) answer(ctx context.Context, req request) {
	result, rerr := s.handle(ctx, req)
	if req.ID == nil {
		return
	}
	if rerr != nil {
		s.write(response{ID: req.ID, Error: rerr})
		return
	}
	s.write(response{ID: req.ID, Result: result})
}

type callParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

type content struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type callResult struct {
	Content []content `json:"content"`
	IsError bool      `json:"isError"`
}

func (s *Server) handle(ctx context.Context, req request) (any, *rpcError) {
	switch req.Method {
	case "initialize":
		return map[string]any{
			"protocolVersion": ProtocolVersion,
			"capabilities":    map[string]any{"tools": map[string]any{"listChanged": false}},
			"serverInfo":      map[string]any{"name": "baton", "version": s.version},
		}, nil
	case "ping":
		return struct{}{}, nil
	case "tools/list":
		tools, err := s.b.List(ctx)
		if err != nil {
			return nil, &rpcError{codeInternal, err.Error()}
		}
		if tools == nil {
			tools = []Tool{}
		}
		return map[string]any{"tools": tools}, nil
	case "tools/call":
		var p callParams
		if err := json.Unmarshal(req.Params, &p); err != nil || p.Name == "" {
			return nil, &rpcError{codeInvalidParams, "tools/call needs params {name, arguments}"}
		}
		if len(p.Arguments) == 0 || string(p.Arguments) == "null" {
			p.Arguments = json.RawMessage("{}")
		}
		text, err := s.b.Call(ctx, p.Name, p.Arguments)
		switch {
		case errors.Is(err, ErrUnknownTool):
			return nil, &rpcError{codeInvalidParams, err.Error()}
		case err != nil:
			return callResult{Content: []content{{"text", err.Error()}}, IsError: true}, nil
		}
		return callResult{Content: []content{{"text", text}}}, nil
	}
	if req.ID == nil {
		return nil, nil // notifications/initialized, cancelled, …: nothing to do
	}
	return nil, &rpcError{codeMethodNotFound, "method not found: " + req.Method}
}

func (s *Server) write(r response) {
	r.JSONRPC = "2.0"
	if r.ID == nil {
		r.ID = json.RawMessage("null")
	}
	b, err := json.Marshal(r)
	if err != nil {
		b, _ = json.Marshal(response{JSONRPC: "2.0", ID: r.ID, Error: &rpcError{codeInternal, err.Error()}})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = s.w.Write(append(b, '\n'))
}
