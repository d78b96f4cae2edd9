package stage

import (
	"os"
	"sync"
	"time"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox/internal/chain"
)

// state appends the runner's diagnostics to the run's state.ndjson: one
// record per phase, each one write, so a runner killed mid-way still
// shows the last phase it reached (the page cache keeps what a dead
// process wrote). Only a failure's record is also fsynced, to survive a
// host crash: an fsync per phase cost a start about 0.3 ms each, some 30
// of them, and a blocked thread each. A nil *state does nothing:
// diagnostics never stop a run.
type state struct {
	mu    sync.Mutex
	f     *os.File
	stage string
}

// stateRecord is one line of state.ndjson.
type stateRecord struct {
	Time   string `json:"time"`
	Stage  string `json:"stage"`
	Phase  string `json:"phase"`
	Status string `json:"status"` // stateOK, stateError or stateRefused
	Detail string `json:"detail,omitempty"`
}

// openState opens (creating, 0600) the state file for append; nil when
// it cannot.
func openState(path, stage string) *state {
	f, err := journal.OpenNoLinks(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil
	}
	return &state{f: f, stage: stage}
}

// stateOn records to f, an inherited descriptor of the state file.
func stateOn(f *os.File, stage string) *state {
	if f == nil {
		return nil
	}
	return &state{f: f, stage: stage}
}

func (s *state) ok(phase, detail string) { s.record(phase, stateOK, detail) }

func (s *state) fail(phase string, err error) { s.record(phase, stateError, err.Error()) }

func (s *state) record(phase, status, detail string) {
	if s == nil {
		return
	}
	line := append(chain.MustJSON(stateRecord{
		Time:   time.Now().UTC().Format(time.RFC3339Nano),
		Stage:  s.stage,
		Phase:  phase,
		Status: status,
		Detail: detail,
	}), '\n')
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.f.Write(line); err == nil && status == stateError {
		_ = s.f.Sync()
	}
}

func (s *state) close() {
	if s != nil {
		_ = s.f.Close()
	}
}
