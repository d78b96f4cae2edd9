package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/consumer"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/publisher"
	"github.com/batonhq/baton/sandbox"
	"github.com/batonhq/baton/worker"
)

// harness is one worker on an embedded server, with the real runner binary.
type harness struct {
	t        *testing.T
	s        *server.Server
	nc       *nats.Conn
	js       jetstream.JetStream
	names    protocol.Names
	cfg      *config.Config
	stateDir string
	w        *worker.Worker
	stops    map[string]func()
	// regs are the workers' metrics, by worker ID (a test's own
	// WithMetrics replaces its worker's).
	regs map[string]*prometheus.Registry
}

type harnessOption func(*server.Options, *config.Config)

// withStore runs the server on a fixed port and store, so it can restart.
func withStore(dir string, port int) harnessOption {
	return func(o *server.Options, _ *config.Config) { o.StoreDir, o.Port = dir, port }
}

func withMaxPayload(n int32) harnessOption {
	return func(o *server.Options, _ *config.Config) { o.MaxPayload = n }
}

func withConfig(f func(*config.Config)) harnessOption {
	return func(_ *server.Options, c *config.Config) { f(c) }
}

func newHarness(t *testing.T, opts ...harnessOption) *harness {
	t.Helper()
	cfg := config.Default()
	cfg.LeaseTTL = 3 * time.Second
	cfg.Concurrency = 8
	cfg.Profiles["fake"] = config.Profile{Command: []string{"{baton}", "fake-agent"}, AllowArgs: config.AnyArgs, Timeout: 2 * time.Minute}
	s := testenv.RunServerWith(t, func(o *server.Options) {
		for _, opt := range opts {
			opt(o, cfg)
		}
	})
	for _, opt := range opts {
		opt(&server.Options{}, cfg)
	}
	nc, js := testenv.Connect(t, s)
	h := &harness{t: t, s: s, nc: nc, js: js, names: protocol.MustNames(cfg.Prefix), cfg: cfg, stateDir: testenv.StateDir(t), stops: map[string]func(){},
		regs: map[string]*prometheus.Registry{}}
	h.w, _ = h.addWorker("w1")
	return h
}

// addWorker starts another worker of node n1 on the harness's state dir;
// stop ends it the way SIGTERM does (hand-off) and waits for it.
func (h *harness) addWorker(id string, opts ...worker.Option) (*worker.Worker, func()) {
	t := h.t
	t.Helper()
	nc, _ := testenv.Connect(t, h.s)
	reg := prometheus.NewRegistry()
	h.regs[id] = reg
	w, err := worker.New(nc, h.cfg, append([]worker.Option{
		worker.WithStateDir(h.stateDir), worker.WithNode("n1"), worker.WithID(id), worker.WithMetrics(reg),
		worker.WithBinary(testenv.BatonBinary(t)), worker.WithLogger(testLogger(t).With().Str("w", id).Logger())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	stop := testenv.Serve(t, "worker "+id, w.Ready(), 20*time.Second, w.Run)
	h.stops[w.ID()] = stop
	return w, stop
}

func testLogger(t *testing.T) zerolog.Logger {
	if os.Getenv("BATON_TEST_LOG") != "" {
		return zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr}).With().Timestamp().Logger()
	}
	return zerolog.Nop()
}

var runSeq atomic.Int64

func newRunID(t *testing.T) string {
	return fmt.Sprintf("%s-%d", strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()), runSeq.Add(1))
}

// submit publishes a job as any NATS client would.
func (h *harness) submit(job map[string]any) {
	h.t.Helper()
	b, err := json.Marshal(job)
	if err != nil {
		h.t.Fatal(err)
	}
	msg := nats.NewMsg(h.names.RunJobSubject())
	msg.Data = b
	if id, ok := job["runId"].(string); ok {
		msg.Header.Set(nats.MsgIdHdr, id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := h.js.PublishMsg(ctx, msg); err != nil {
		h.t.Fatalf("submit: %v", err)
	}
}

// chain reads a run's messages in order until its terminal status. It
// reads in short waits and, when the server has restarted under it, goes
// on with a new consumer from the last message it has.
func (h *harness) chain(runID string, timeout time.Duration) []jetstream.Msg {
	h.t.Helper()
	end := time.Now().Add(timeout)
	var msgs []jetstream.Msg
	var c jetstream.Consumer
	for time.Now().Before(end) {
		if c == nil {
			cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{h.names.RunFilter(runID)}}
			if n := len(msgs); n > 0 {
				md, _ := msgs[n-1].Metadata()
				cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, md.Sequence.Stream+1
			}
			what := fmt.Sprintf("a consumer of run %s's chain after %d messages (the server may be restarting)", runID, len(msgs))
			testenv.WaitFor(h.t, time.Until(end), what, func() bool {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				var err error
				c, err = h.js.OrderedConsumer(ctx, h.names.EventsStream(), cfg)
				return err == nil
			})
		}
		m, err := c.Next(jetstream.FetchMaxWait(2 * time.Second))
		if err != nil {
			c = nil
			continue
		}
		msgs = append(msgs, m)
		if strings.HasSuffix(m.Subject(), ".status") {
			st, err := protocol.ParseStatus(m.Data())
			if err != nil {
				h.t.Fatalf("bad status %q: %v", m.Data(), err)
			}
			if st.Status.Terminal() {
				return msgs
			}
		}
	}
	h.t.Fatalf("run %s: no terminal status after %v (%d messages)", runID, timeout, len(msgs))
	return nil
}

func deadline(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// statuses returns the statuses on a chain.
func statuses(t *testing.T, msgs []jetstream.Msg) []protocol.Status {
	var out []protocol.Status
	for _, m := range msgs {
		if strings.HasSuffix(m.Subject(), ".status") {
			st, err := protocol.ParseStatus(m.Data())
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, st)
		}
	}
	return out
}

// assertChainMatchesJournal proves I2 for one run: the lines on the chain,
// chunks joined, equal the journal before its sentinel byte for byte and
// in order; JSON lines are on .events and the others on .raw; every message
// carries its offset and a unique Msg-Id. And each holder's first message
// is a status, or the rest of a chunked line: what fences a stale holder's
// fast batch (publisher.NewChain).
func (h *harness) assertChainMatchesJournal(runID string, msgs []jetstream.Msg) (lines int) {
	t := h.t
	t.Helper()
	journal, err := os.ReadFile(filepath.Join(h.stateDir, "runs", runID, "journal.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	body := journal[:bytes.LastIndexByte(journal, '\n')+1]
	if len(body) > 0 {
		last := body[bytes.LastIndexByte(body[:len(body)-1], '\n')+1:]
		if bytes.Contains(last, []byte(`"__nonce"`)) {
			body = body[:len(body)-len(last)] // drop the sentinel
		}
	}
	var got bytes.Buffer
	var pending []byte
	seen := map[string]bool{}
	var lastOffset int64
	epoch := ""
	for i, m := range msgs {
		hdr := m.Headers()
		if e := hdr.Get(protocol.HeaderEpoch); e != epoch {
			if c := hdr.Get(protocol.HeaderChunk); !strings.HasSuffix(m.Subject(), ".status") && (c == "" || strings.HasPrefix(c, "1/")) {
				t.Fatalf("message %d on %s is the first of epoch %s (after %q) and not a status", i, m.Subject(), e, epoch)
			}
			epoch = e
		}
		id := hdr.Get(nats.MsgIdHdr)
		if id == "" || seen[id] {
			t.Fatalf("message on %s has missing or repeated Msg-Id %q", m.Subject(), id)
		}
		seen[id] = true
		off, err := strconv.ParseInt(hdr.Get(protocol.HeaderOffset), 10, 64)
		if err != nil {
			t.Fatalf("message on %s: Baton-Offset %q", m.Subject(), hdr.Get(protocol.HeaderOffset))
		}
		if off < lastOffset {
			t.Fatalf("offset went back from %d to %d", lastOffset, off)
		}
		lastOffset = off
		if strings.HasSuffix(m.Subject(), ".status") {
			continue
		}
		if strings.HasSuffix(m.Subject(), ".input") {
			// The journal holds the runner's record of the input there.
			h.assertInputRecord(runID, body, int64(got.Len()), off, m)
			got.Write(body[got.Len():off])
			lines++
			continue
		}
		pending = append(pending, m.Data()...)
		if c := hdr.Get(protocol.HeaderChunk); c != "" {
			i, n, _ := strings.Cut(c, "/")
			if i != n {
				continue
			}
		}
		isJSON := len(bytes.TrimSpace(pending)) > 0 && json.Valid(pending)
		if isJSON != strings.HasSuffix(m.Subject(), ".events") {
			t.Fatalf("line %.60q went to %s", pending, m.Subject())
		}
		got.Write(pending)
		got.WriteByte('\n')
		if int64(got.Len()) != off {
			t.Fatalf("after %d lines the chain has %d bytes but Baton-Offset says %d", lines, got.Len(), off)
		}
		pending = pending[:0]
		lines++
	}
	if !bytes.Equal(got.Bytes(), body) {
		t.Fatalf("chain (%d bytes) differs from journal (%d bytes) at byte %d", got.Len(), len(body), firstDiff(got.Bytes(), body))
	}
	return lines
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestEventsEqualJournal(t *testing.T) {
	h := newHarness(t)
	id := newRunID(t)
	h.submit(map[string]any{"runId": id, "profile": "fake", "input": "hello",
		"args": []string{"--lines", "400", "--raw-every", "7", "--line-size", "150", "--seed", "3", "--partial-last", "--forge-sentinel"}})
	msgs := h.chain(id, 60*time.Second)
	n := h.assertChainMatchesJournal(id, msgs)
	if n < 400 {
		t.Fatalf("only %d lines", n)
	}
	st := statuses(t, msgs)
	if st[0].Status != protocol.StatusStarted || st[len(st)-1].Status != protocol.StatusSucceeded {
		t.Fatalf("statuses %+v", st)
	}
	raw := 0
	for _, m := range msgs {
		if strings.HasSuffix(m.Subject(), ".raw") {
			raw++
		}
	}
	if raw < 400/7 {
		t.Fatalf("only %d raw lines", raw)
	}
}

func TestOversizeLineArrivesWhole(t *testing.T) {
	h := newHarness(t, withMaxPayload(64<<10))
	id := newRunID(t)
	h.submit(map[string]any{"runId": id, "profile": "fake",
		"args": []string{"--lines", "12", "--line-size", "300000", "--seed", "9"}})
	msgs := h.chain(id, 60*time.Second)
	chunks := 0
	for _, m := range msgs {
		if m.Headers().Get(protocol.HeaderChunk) != "" {
			chunks++
		}
		if len(m.Data()) > 64<<10 {
			t.Fatalf("message of %d bytes over the server's max payload", len(m.Data()))
		}
	}
	if chunks < 2*5 {
		t.Fatalf("only %d chunks", chunks)
	}
	h.assertChainMatchesJournal(id, msgs)
}

func TestTerminalStatusFollowsAgentExit(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		name   string
		args   []string
		status protocol.StatusType
		exit   int
		signal string
		stderr string
	}{
		{"exit 0", []string{"--lines", "3"}, protocol.StatusSucceeded, 0, "", ""},
		{"exit 1", []string{"--lines", "3", "--exit-code", "1", "--stderr", "boom: it broke"}, protocol.StatusFailed, 1, "", "boom: it broke"},
		{"killed", []string{"--lines", "3", "--signal", "KILL"}, protocol.StatusFailed, 137, "KILL", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := newRunID(t)
			h.submit(map[string]any{"runId": id, "profile": "fake", "args": tt.args})
			msgs := h.chain(id, 60*time.Second)
			h.assertChainMatchesJournal(id, msgs)
			st := statuses(t, msgs)
			last := st[len(st)-1]
			terminal := 0
			for _, s := range st {
				if s.Status.Terminal() {
					terminal++
				}
			}
			if terminal != 1 {
				t.Fatalf("%d terminal statuses", terminal)
			}
			if last.Status != tt.status || last.ExitCode == nil || *last.ExitCode != tt.exit || last.Signal != tt.signal {
				t.Fatalf("terminal status %+v, want %s exit %d signal %q", last, tt.status, tt.exit, tt.signal)
			}
			if !strings.Contains(last.StderrTail, tt.stderr) {
				t.Fatalf("stderr tail %q lacks %q", last.StderrTail, tt.stderr)
			}
			// The record is settled right after the terminal status.
			var rec kv.RunRecord
			defer func() {
				if t.Failed() {
					t.Logf("the last record read: %+v", rec)
				}
			}()
			testenv.WaitFor(t, 5*time.Second, fmt.Sprintf("the record to say %s, finished, exit code %d", tt.status, tt.exit), func() bool {
				rec = h.record(id)
				return string(rec.State) == string(tt.status) && !rec.FinishedAt.IsZero() && rec.ExitCode != nil && *rec.ExitCode == tt.exit
			})
		})
	}
}

func (h *harness) record(runID string) kv.RunRecord {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := kv.Open[kv.RunRecord](ctx, h.js, h.names.RunsBucket())
	if err != nil {
		h.t.Fatal(err)
	}
	rec, _, err := st.Get(ctx, runID)
	if err != nil {
		h.t.Fatalf("run record %s: %v", runID, err)
	}
	return rec
}

func TestDuplicateRunIDStartsNothing(t *testing.T) {
	h := newHarness(t)
	id := newRunID(t)
	h.submit(map[string]any{"runId": id, "profile": "fake", "args": []string{"--lines", "5"}})
	first := h.chain(id, 60*time.Second)
	// Same runId, another Msg-Id so the stream's dedupe does not hide it.
	b, _ := json.Marshal(map[string]any{"runId": id, "profile": "fake", "args": []string{"--lines", "50"}})
	msg := nats.NewMsg(h.names.RunJobSubject())
	msg.Data = b
	msg.Header.Set(nats.MsgIdHdr, id+"-again")
	if _, err := h.js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	entry := h.waitDLQ(1, 20*time.Second)[0]
	if entry.Header.Get(protocol.HeaderReason) != string(protocol.ReasonDuplicate) || !bytes.Equal(entry.Data, b) {
		t.Fatalf("DLQ entry %v %q", entry.Header, entry.Data)
	}
	// Nothing was added to the run's chain by the time the job was settled.
	h.waitJobsSettled("the duplicate job settled")
	info, err := h.js.Stream(context.Background(), h.names.EventsStream())
	if err != nil {
		t.Fatal(err)
	}
	last, err := info.GetLastMsgForSubject(context.Background(), h.names.RunFilter(id))
	if err != nil {
		t.Fatal(err)
	}
	md, _ := first[len(first)-1].Metadata()
	if last.Sequence != md.Sequence.Stream {
		t.Fatalf("chain grew after the duplicate: last seq %d, was %d", last.Sequence, md.Sequence.Stream)
	}
}

// waitJobsSettled waits, bounded, until no job is left on the jobs
// stream's run subject: each was acknowledged, rejected or terminated, so
// the worker that had it is done with it.
func (h *harness) waitJobsSettled(what string) {
	h.t.Helper()
	ctx := h.t.Context()
	testenv.WaitFor(h.t, 20*time.Second, what, func() bool {
		stream, err := h.js.Stream(ctx, h.names.JobsStream())
		if err != nil {
			return false
		}
		info, err := stream.Info(ctx, jetstream.WithSubjectFilter(h.names.RunJobSubject()))
		return err == nil && info.State.Subjects[h.names.RunJobSubject()] == 0
	})
}

// logged counts the lines of a worker's JSON log about runID that say msg.
func logged(log *testenv.Buffer, runID, msg string) int {
	n := 0
	for line := range strings.SplitSeq(log.String(), "\n") {
		if strings.Contains(line, `"run_id":"`+runID+`"`) && strings.Contains(line, `"message":"`+msg+`"`) {
			n++
		}
	}
	return n
}

// waitDLQ waits for n DLQ entries and returns them.
func (h *harness) waitDLQ(n int, timeout time.Duration) []*jetstream.RawStreamMsg {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	s, err := h.js.Stream(ctx, h.names.DLQStream())
	if err != nil {
		h.t.Fatal(err)
	}
	for {
		info, err := s.Info(ctx)
		if err != nil {
			h.t.Fatal(err)
		}
		if info.State.Msgs >= uint64(n) {
			var out []*jetstream.RawStreamMsg
			for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
				m, err := s.GetMsg(ctx, seq)
				if err != nil {
					h.t.Fatal(err)
				}
				out = append(out, m)
			}
			return out
		}
		select {
		case <-ctx.Done():
			h.t.Fatalf("DLQ has %d entries, want %d", info.State.Msgs, n)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func TestGarbageJobsGoToDLQWhileGoodJobRuns(t *testing.T) {
	h := newHarness(t, withConfig(func(c *config.Config) { c.MaxJobBytes = 4096 }))
	garbage := []struct {
		data   string
		ct     string
		reason protocol.Reason
	}{
		{`{not json`, "", protocol.ReasonMalformed},
		{`[1,2,3]`, "", protocol.ReasonMalformed},
		{`{"runId":"ok-%d","profile":"fake","bogus":1}`, "", protocol.ReasonUnknownField},
		{`{"runId":"bad.id.%d","profile":"fake"}`, "", protocol.ReasonBadRunID},
		{`{"runId":"r-%d","profile":"nosuch"}`, "", protocol.ReasonUnknownProfile},
		{`{"runId":"r-%d","profile":"demo","env":{"SECRET":"x"}}`, "", protocol.ReasonNotAllowed},
		{`{"runId":"r-%d","profile":"fake","input":"` + strings.Repeat("x", 5000) + `"}`, "", protocol.ReasonOversize},
		{"\xc1\x00\xff%d", protocol.ContentTypeMsgpack, protocol.ReasonMalformed},
	}
	good := newRunID(t)
	ctx := context.Background()
	for i := range 1000 {
		if i == 500 {
			h.submit(map[string]any{"runId": good, "profile": "fake", "args": []string{"--lines", "20", "--rate", "100"}})
		}
		g := garbage[i%len(garbage)]
		msg := nats.NewMsg(h.names.RunJobSubject())
		msg.Data = []byte(strings.Replace(g.data, "%d", strconv.Itoa(i), 1))
		if g.ct != "" {
			msg.Header.Set(protocol.HeaderContentType, g.ct)
		}
		if _, err := h.js.PublishMsgAsync(msg); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-h.js.PublishAsyncComplete():
	case <-time.After(10 * time.Second):
		t.Fatal("publishing garbage timed out")
	}
	st := statuses(t, h.chain(good, 90*time.Second))
	if st[len(st)-1].Status != protocol.StatusSucceeded {
		t.Fatalf("good job: %+v", st[len(st)-1])
	}
	entries := h.waitDLQ(1000, 90*time.Second)
	if len(entries) != 1000 {
		t.Fatalf("%d DLQ entries", len(entries))
	}
	for i, e := range entries {
		want := garbage[i%len(garbage)].reason
		if got := e.Header.Get(protocol.HeaderReason); got != string(want) {
			t.Errorf("entry %d (%.40q): reason %q, want %q (%s)", i, e.Data, got, want, e.Header.Get(protocol.HeaderError))
		}
		if e.Header.Get(protocol.HeaderError) == "" {
			t.Errorf("entry %d has no error text", i)
		}
	}
	// Nothing is left behind on the jobs stream.
	js, _ := h.js.Stream(ctx, h.names.JobsStream())
	info, _ := js.Info(ctx)
	if info.State.Msgs != 0 {
		t.Fatalf("%d jobs left on the jobs stream", info.State.Msgs)
	}
}

// TestHandoffOnShutdown stops the worker holding a run in the middle of it:
// a worker of the same node takes the released lease and resumes, and the
// chain still equals the journal with one terminal status (I2, I4, I5).
func TestHandoffOnShutdown(t *testing.T) {
	h := newHarness(t)
	_, stopSecond := h.addWorker("w2")
	defer stopSecond()
	id := newRunID(t)
	h.submit(map[string]any{"runId": id, "profile": "fake",
		"args": []string{"--lines", "600", "--rate", "300", "--raw-every", "11", "--seed", "5"}})
	holder := h.waitStatus(id, protocol.StatusStarted).Worker
	h.waitLines(id, 150)
	h.stopWorker(holder)
	msgs := h.chain(id, 60*time.Second)
	h.assertChainMatchesJournal(id, msgs)
	st := statuses(t, msgs)
	var kinds []string
	for _, s := range st {
		kinds = append(kinds, string(s.Status))
	}
	if got := strings.Join(kinds, ","); got != "started,handoff,attached,succeeded" {
		t.Fatalf("statuses %s", got)
	}
	if st[2].Epoch <= st[1].Epoch || st[2].Worker == holder || st[2].Offset != st[1].Offset {
		t.Fatalf("handoff %+v then attached %+v", st[1], st[2])
	}
	if d := st[2].Time.Sub(st[1].Time); d > 2*time.Second {
		t.Fatalf("hand-off took %v", d)
	}
}

// TestLeaseExpiryRecovery stops a worker without releasing its lease (its
// grace is too short to hand off), as a crash does: the lease expires and a
// worker of the node re-attaches from the chain.
func TestLeaseExpiryRecovery(t *testing.T) {
	h := newHarness(t)
	h.stopWorker("w1")
	h.addWorker("crashy", worker.WithGrace(0))
	id := newRunID(t)
	h.submit(map[string]any{"runId": id, "profile": "fake",
		"args": []string{"--lines", "600", "--rate", "100", "--seed", "6"}})
	if holder := h.waitStatus(id, protocol.StatusStarted).Worker; holder != "crashy" {
		t.Fatalf("run started by %s", holder)
	}
	h.addWorker("w2")
	h.waitLines(id, 40)
	h.stopWorker("crashy")
	msgs := h.chain(id, 60*time.Second)
	h.assertChainMatchesJournal(id, msgs)
	st := statuses(t, msgs)
	if st[len(st)-1].Status != protocol.StatusSucceeded {
		t.Fatalf("statuses %+v", st)
	}
	// w2 re-attaches the crashed run (and, on a machine loaded enough to
	// make it miss a renewal, may lose and re-take it: that is fine too).
	var attached []protocol.Status
	for _, s := range st {
		if s.Status == protocol.StatusAttached {
			attached = append(attached, s)
		}
	}
	if len(attached) == 0 || attached[0].Worker != "w2" || attached[0].Epoch <= st[0].Epoch {
		t.Fatalf("no re-attach by w2 after the crash: %+v", st)
	}
}

func (h *harness) stopWorker(id string) {
	h.t.Helper()
	stop := h.stops[id]
	if stop == nil {
		h.t.Fatalf("no worker %q", id)
	}
	stop()
}

// waitStatus returns the first status of kind s on the run's chain.
func (h *harness) waitStatus(runID string, s protocol.StatusType) protocol.Status {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := h.js.OrderedConsumer(ctx, h.names.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{h.names.StatusSubject(runID)},
	})
	if err != nil {
		h.t.Fatal(err)
	}
	for {
		m, err := c.Next(jetstream.FetchMaxWait(time.Until(deadline(ctx))))
		if err != nil {
			h.t.Fatalf("run %s: no %s status: %v", runID, s, err)
		}
		st, err := protocol.ParseStatus(m.Data())
		if err != nil {
			h.t.Fatal(err)
		}
		if st.Status == s {
			return st
		}
	}
}

// waitLines waits, bounded, until at least n messages besides statuses
// are on the run's chain: the run is under way, mid-stream.
func (h *harness) waitLines(runID string, n int) {
	h.t.Helper()
	ctx := h.t.Context()
	testenv.WaitFor(h.t, 30*time.Second, fmt.Sprintf("run %s to have %d lines on its chain", runID, n), func() bool {
		stream, err := h.js.Stream(ctx, h.names.EventsStream())
		if err != nil {
			return false
		}
		info, err := stream.Info(ctx, jetstream.WithSubjectFilter(h.names.RunFilter(runID)))
		if err != nil {
			return false
		}
		lines := 0
		for subj, c := range info.State.Subjects {
			if !strings.HasSuffix(subj, ".status") {
				lines += int(c)
			}
		}
		return lines >= n
	})
}

func (h *harness) terminal(runID string) protocol.Status {
	h.t.Helper()
	return h.terminalWithin(runID, 60*time.Second)
}

// terminalWithin is terminal for a run that may take up to timeout to end.
func (h *harness) terminalWithin(runID string, timeout time.Duration) protocol.Status {
	h.t.Helper()
	msgs := h.chain(runID, timeout)
	h.assertChainMatchesJournal(runID, msgs)
	st := statuses(h.t, msgs)
	return st[len(st)-1]
}

// TestCancelIsDurableIntent: a cancel request, answered by a worker, stops
// the run its holder follows; and one recorded while nobody holds the run
// is honoured by the worker that attaches it later.
func TestCancelIsDurableIntent(t *testing.T) {
	h := newHarness(t)
	c, err := client.New(h.js, h.names)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	held := newRunID(t)
	h.submit(map[string]any{"runId": held, "profile": "fake", "args": []string{"--duration", "60s", "--rate", "20"}})
	h.waitStatus(held, protocol.StatusStarted)
	if rep, err := c.Cancel(ctx, held); err != nil || rep.Node != "n1" || rep.Worker != "w1" {
		t.Fatalf("Cancel = %+v, %v", rep, err)
	}
	if st := h.terminal(held); st.Status != protocol.StatusCancelled {
		t.Fatalf("terminal %+v", st)
	}
	// The record follows the terminal status; then a cancel is refused.
	testenv.WaitFor(t, 10*time.Second, "a cancel of the ended run refused as terminal", func() bool {
		_, err := c.Cancel(ctx, held)
		return errors.Is(err, client.ErrTerminal)
	})

	later := newRunID(t)
	h.submit(map[string]any{"runId": later, "profile": "fake", "args": []string{"--duration", "60s", "--rate", "20"}})
	h.waitStatus(later, protocol.StatusStarted)
	h.stopWorker("w1") // nobody of n1 is there to attach
	// A worker of another node answers, and cannot hold the run.
	h.addWorker("o1", worker.WithNode("n2"), worker.WithStateDir(testenv.StateDir(t)))
	if _, err := c.Cancel(ctx, later); err != nil {
		t.Fatal(err)
	}
	h.addWorker("w2")
	if st := h.terminal(later); st.Status != protocol.StatusCancelled {
		t.Fatalf("terminal %+v", st)
	}
}

// TestCancelAmidANoticeFlood: a cancel notice arriving in a burst of
// notices for other runs the worker holds (a pool cancelling all its runs
// at once: each notice costs the holder a read of that run's record)
// reaches it at once, not at its periodic check of its runs' records
// (every 4 lease TTLs, 12 s here).
func TestCancelAmidANoticeFlood(t *testing.T) {
	h := newHarness(t)
	c, err := client.New(h.js, h.names)
	if err != nil {
		t.Fatal(err)
	}
	id, other := newRunID(t), newRunID(t)
	for _, r := range []string{id, other} {
		h.submit(map[string]any{"runId": r, "profile": "fake", "args": []string{"--duration", "60s", "--rate", "20"}})
	}
	h.waitStatus(id, protocol.StatusStarted)
	h.waitStatus(other, protocol.StatusStarted)
	flooder, err := nats.Connect(h.s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer flooder.Close()
	stop := make(chan struct{})
	flooded := make(chan error, 1)
	var sent atomic.Int64
	go func() {
		for {
			select {
			case <-stop:
				flooded <- flooder.Flush()
				return
			default:
			}
			if err := flooder.Publish(h.names.CancelledSubject(other), nil); err != nil {
				flooded <- err
				return
			}
			sent.Add(1)
		}
	}()
	testenv.WaitFor(t, 10*time.Second, "the flood of notices to be under way (10,000 sent)", func() bool { return sent.Load() >= 10_000 })
	asked := time.Now()
	if _, err := c.Cancel(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	// The flood goes on until the run is cancelled.
	h.waitStatus(id, protocol.StatusCancelled)
	took := time.Since(asked)
	close(stop)
	if err := <-flooded; err != nil {
		t.Fatal(err)
	}
	if took > 6*time.Second {
		t.Fatalf("cancelled %v after the request, amid a flood of notices: its notice was lost", took)
	}
}

func TestRunnerEnforcesTimeout(t *testing.T) {
	h := newHarness(t)
	id := newRunID(t)
	h.submit(map[string]any{"runId": id, "profile": "fake", "timeout": "1s", "args": []string{"--duration", "60s", "--rate", "20"}})
	start := time.Now()
	st := h.terminal(id)
	if st.Status != protocol.StatusTimeout || time.Since(start) > 20*time.Second {
		t.Fatalf("terminal %+v after %v", st, time.Since(start))
	}
}

// TestOutputLimitFailsRun: an agent printing forever is killed at its
// output limit (here a job's, lower than its profile's 1 GiB default); the
// run ends failed, saying so, and everything printed up to the limit is
// on the chain exactly.
func TestOutputLimitFailsRun(t *testing.T) {
	h := newHarness(t)
	id := newRunID(t)
	const limit = 256 << 10
	h.submit(map[string]any{"runId": id, "profile": "fake", "limits": map[string]string{"output": "256KiB"},
		"args": []string{"--duration", "10m", "--line-size", "1000", "--raw-every", "9"}})
	msgs := h.chain(id, 60*time.Second)
	st := statuses(t, msgs)
	last := st[len(st)-1]
	if last.Status != protocol.StatusFailed || !strings.Contains(last.Reason, "output limit") || last.Signal != "KILL" {
		t.Fatalf("terminal status %+v, want failed for the output limit", last)
	}
	h.assertChainMatchesJournal(id, msgs)
	if last.Offset != limit && last.Offset != limit+1 { // +1: the cut line ended by the runner
		t.Fatalf("the run ended at offset %d; the limit is %d bytes", last.Offset, limit)
	}
}

// TestRunnerDeathFailsRun kills the runner (and so the sandbox) of a live
// run: with no sentinel and no runner, the run ends failed.
func TestRunnerDeathFailsRun(t *testing.T) {
	h := newHarness(t)
	id := newRunID(t)
	h.submit(map[string]any{"runId": id, "profile": "fake", "args": []string{"--duration", "60s", "--rate", "20", "--stderr", "x"}})
	h.waitStatus(id, protocol.StatusStarted)
	b, err := os.ReadFile(filepath.Join(h.stateDir, "runs", id, "runner.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	st := h.terminal(id)
	if st.Status != protocol.StatusFailed || !strings.Contains(st.Reason, "sentinel") {
		t.Fatalf("terminal %+v", st)
	}
}

// TestRestartedWorkerReattaches: every worker of the node stops while a
// run goes on; a worker started later finds it in the state dir.
func TestRestartedWorkerReattaches(t *testing.T) {
	h := newHarness(t)
	id := newRunID(t)
	h.submit(map[string]any{"runId": id, "profile": "fake", "args": []string{"--lines", "300", "--rate", "150"}})
	h.waitStatus(id, protocol.StatusStarted)
	h.waitLines(id, 40)
	h.stopWorker("w1") // hands off; nobody is there to attach
	// The run goes on unheld: the worker started later has lines to catch
	// up on (or the whole end, on a machine slow enough).
	at := h.waitStatus(id, protocol.StatusHandoff).Offset
	testenv.WaitFor(t, 20*time.Second, fmt.Sprintf("the agent to write 50 lines past the hand-off at %d, or its end, unheld", at), func() bool {
		b, err := os.ReadFile(filepath.Join(h.stateDir, "runs", id, "journal.ndjson"))
		return err == nil && (bytes.Count(b[min(at, int64(len(b))):], []byte("\n")) >= 50 || bytes.Contains(b, []byte(`"__nonce"`)))
	})
	h.addWorker("w9")
	if st := h.terminal(id); st.Status != protocol.StatusSucceeded {
		t.Fatalf("terminal %+v", st)
	}
}

// TestLostNode: the only worker of a node goes away for good while its run
// goes on; after the grace period one worker of another node ends the run
// as lost, with exactly one terminal status.
func TestLostNode(t *testing.T) {
	// Most of it is waiting for the lost node's lease and the reaper: it
	// waits beside the package's other such tests.
	t.Parallel()
	h := newHarness(t)
	h.stopWorker("w1")
	nc, _ := testenv.Connect(t, h.s)
	goneDir := testenv.StateDir(t)
	id := newRunID(t)
	// The agent outlives its lost node; stop it when the test ends.
	t.Cleanup(func() { _ = sandbox.Cancel(journal.Dir(filepath.Join(goneDir, "runs", id))) })
	gone, err := worker.New(nc, h.cfg, worker.WithStateDir(goneDir), worker.WithNode("gone"), worker.WithID("gone-1"),
		worker.WithBinary(testenv.BatonBinary(t)), worker.WithGrace(0), worker.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gone.Run(ctx) }()
	<-gone.Ready()
	h.submit(map[string]any{"runId": id, "profile": "fake", "retries": 1, "args": []string{"--duration", "40s", "--rate", "5"}})
	h.waitStatus(id, protocol.StatusStarted)
	cancel()
	<-done
	h.addWorker("n1-a")
	h.addWorker("n1-b")
	start := time.Now()
	msgs := h.chain(id, 60*time.Second)
	st := statuses(t, msgs)
	last := st[len(st)-1]
	if last.Status != protocol.StatusLost || !strings.Contains(last.Reason, "node gone") {
		t.Fatalf("terminal %+v", last)
	}
	t.Logf("lost after %v", time.Since(start))
	terminal := 0
	for _, s := range st {
		if s.Status.Terminal() {
			terminal++
		}
	}
	if terminal != 1 {
		t.Fatalf("%d terminal statuses", terminal)
	}
	// The job allowed one retry: it runs again as a new run on a live node.
	retry := id + "-a2"
	if !strings.Contains(last.Reason, "retried as run "+retry) || last.RetriedAs != retry {
		t.Fatalf("lost status does not name the retry: reason %q, retriedAs %q", last.Reason, last.RetriedAs)
	}
	h.waitStatus(retry, protocol.StatusStarted)
	_ = sandbox.Cancel(journal.Dir(filepath.Join(h.stateDir, "runs", retry)))
	if st := h.terminal(retry); st.Status != protocol.StatusCancelled {
		t.Fatalf("retry ended %+v", st)
	}
	rec := h.record(retry)
	if rec.Attempt != 2 || rec.Labels[protocol.LabelRetryOf] != id || rec.Node != "n1" {
		t.Fatalf("retry record %+v", rec)
	}
}

// TestNATSOutageLongerThanLease stops the server for longer than the lease
// TTL while a run goes on: the worker reconnects, its lease is gone, the
// node's recovery re-attaches the run, and nothing is lost or doubled.
func TestNATSOutageLongerThanLease(t *testing.T) {
	// Mostly an outage's wait: beside the package's other such tests.
	t.Parallel()
	dir, port := t.TempDir(), testenv.FreePort(t)
	h := newHarness(t, withStore(dir, port))
	h.addWorker("w2")
	// Twice the lease TTL; a minute under BATON_SOAK. The agent writes all
	// through the outage and a little past it.
	outage := 2 * h.cfg.LeaseTTL
	if os.Getenv("BATON_SOAK") != "" {
		outage = time.Minute
	}
	lines := int((outage + 3*time.Second).Seconds() * 100)
	id := newRunID(t)
	h.submit(map[string]any{"runId": id, "profile": "fake", "args": []string{"--lines", strconv.Itoa(lines), "--rate", "100", "--seed", "8"}})
	h.waitStatus(id, protocol.StatusStarted)
	h.waitLines(id, 90)
	h.s.Shutdown()
	h.s.WaitForShutdown()
	// The outage's length is what is under test: nothing to wait for but
	// time, with the server down.
	time.Sleep(outage)
	testenv.RunServerIn(t, dir, port)
	st := h.terminal(id)
	if st.Status != protocol.StatusSucceeded {
		t.Fatalf("terminal %+v", st)
	}
}

// TestTerminalRecordOutlivesAnOutage takes the server down between the
// publish of a run's terminal status and the write of its terminal record,
// for longer than the worker's grace, so the write fails. The run is left
// for a successor (its directory unfinished, its lease given up) which,
// once the server is back, finds the status on the chain and records it:
// the record ends terminal, no second terminal status is published (I5),
// and the run's directory ends finished.
func TestTerminalRecordOutlivesAnOutage(t *testing.T) {
	// Mostly an outage's and a lease TTL's wait.
	t.Parallel()
	dir, port := t.TempDir(), testenv.FreePort(t)
	// A TTL long enough that the worker's liveness outlives the outage:
	// the successor comes from the lease the worker gave up, not from its
	// liveness lost.
	h := newHarness(t, withStore(dir, port), withConfig(func(c *config.Config) { c.LeaseTTL = 10 * time.Second }))
	id := newRunID(t)
	h.outageAtTerminalRecord(dir, port, id, func() {
		h.submit(map[string]any{"runId": id, "profile": "fake", "args": []string{"--lines", "3"}})
	})

	var rec kv.RunRecord
	defer func() {
		if t.Failed() {
			t.Logf("the last record read: %+v", rec)
		}
	}()
	// The lease is released one TTL after the write failed.
	testenv.WaitFor(t, 3*h.cfg.LeaseTTL, "the record to say succeeded, exit code 0, once the server is back", func() bool {
		rec = h.record(id)
		return rec.State == kv.RunState(protocol.StatusSucceeded) && !rec.FinishedAt.IsZero() && rec.ExitCode != nil && *rec.ExitCode == 0
	})
	finished := filepath.Join(h.stateDir, "runs", id, journal.FinishedName)
	testenv.WaitFor(t, 10*time.Second, "the run directory to be marked finished", func() bool {
		_, err := os.Stat(finished)
		return err == nil
	})
	msgs := h.chain(id, 30*time.Second)
	st := statuses(t, msgs)
	last := st[len(st)-1]
	if last.Status != protocol.StatusSucceeded || rec.Offset != last.Offset {
		t.Fatalf("terminal status %+v; record offset %d", last, rec.Offset)
	}
	if md, err := msgs[len(msgs)-1].Metadata(); err != nil || rec.LastSeq != md.Sequence.Stream {
		t.Fatalf("record's last sequence %d, the terminal status's %+v (%v)", rec.LastSeq, md, err)
	}
	if n := h.statusCount(id); n != len(st) {
		t.Fatalf("%d statuses on the chain, %d up to the first terminal one: %+v", n, len(st), st)
	}
}

// outageAtTerminalRecord runs submit's run on a worker whose record of
// the run's end finds the server (withStore(dir, port)) down for twice
// the grace its write has, so a successor records the end, from the
// status on the chain; it returns once the server is back. The harness's
// lease TTL must outlast the outage: the successor comes from the lease
// the worker gave up, not from its liveness lost.
func (h *harness) outageAtTerminalRecord(dir string, port int, runID string, submit func()) {
	t := h.t
	t.Helper()
	h.stopWorker("w1")
	const grace = time.Second
	down := make(chan struct{})
	h.addWorker("w2", worker.WithGrace(grace), worker.WithBeforeRecordTerminal(func(id string) {
		if id != runID {
			return
		}
		h.s.Shutdown()
		h.s.WaitForShutdown()
		close(down)
	}))
	submit()
	select {
	case <-down:
	case <-time.After(60 * time.Second):
		t.Fatalf("run %s: no terminal status published within 60s", runID)
	}
	// The outage outlasts the grace the record's write has: nothing to
	// wait for but time, with the server down.
	time.Sleep(2 * grace)
	testenv.RunServerIn(t, dir, port)
}

// statusCount is how many statuses the run's chain holds.
func (h *harness) statusCount(runID string) int {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stream, err := h.js.Stream(ctx, h.names.EventsStream())
	if err != nil {
		h.t.Fatal(err)
	}
	subj := h.names.StatusSubject(runID)
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(subj))
	if err != nil {
		h.t.Fatal(err)
	}
	return int(info.State.Subjects[subj])
}

// TestFinishedRunsArePruned: past the run retention the worker removes a
// finished run's directory, journal and workspace included, and nothing
// else; the run's events stay in the stream.
func TestFinishedRunsArePruned(t *testing.T) {
	h := newHarness(t, withConfig(func(c *config.Config) { c.RunRetention = time.Minute }))
	done, live := newRunID(t), newRunID(t)
	h.submit(map[string]any{"runId": done, "profile": "fake", "args": []string{"--lines", "20"}})
	h.submit(map[string]any{"runId": live, "profile": "fake", "args": []string{"--lines", "100000", "--rate", "20"}})
	if st := h.terminal(done); st.Status != protocol.StatusSucceeded {
		t.Fatalf("terminal %+v", st)
	}
	h.waitStatus(live, protocol.StatusStarted)
	doneDir := journal.Dir(filepath.Join(h.stateDir, "runs", done))
	liveDir := journal.Dir(filepath.Join(h.stateDir, "runs", live))
	testenv.WaitFor(t, 10*time.Second, "the finished marker", func() bool { _, err := os.Stat(doneDir.Finished()); return err == nil })
	// Finished two minutes ago, as far as the worker can tell; the live
	// run's files are as old, and it has no marker.
	old := time.Now().Add(-2 * time.Minute)
	for _, p := range []string{doneDir.Finished(), liveDir.Journal(), string(liveDir)} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	testenv.WaitFor(t, 20*time.Second, "the finished run's directory to go", func() bool {
		_, err := os.Stat(string(doneDir))
		return os.IsNotExist(err)
	})
	if _, err := os.Stat(liveDir.Journal()); err != nil {
		t.Fatalf("the live run's journal: %v", err)
	}
	if msgs := h.chain(done, 10*time.Second); len(msgs) < 22 {
		t.Fatalf("the pruned run's chain has %d messages", len(msgs))
	}
	if err := sandbox.Cancel(liveDir); err != nil {
		t.Fatal(err)
	}
	if st := h.terminal(live); st.Status != protocol.StatusCancelled {
		t.Fatalf("live run ended %+v", st)
	}
}

// TestChainRunsFromBatonRunner: with baton-runner beside baton (as
// test/run.sh and testenv build them), a root worker installs both in its
// state dir and every stage of a run's chain is baton-runner, while the
// profile's "{baton}" agent is baton.
func TestChainRunsFromBatonRunner(t *testing.T) {
	beside := filepath.Join(filepath.Dir(testenv.BatonBinary(t)), worker.RunnerName)
	if _, err := os.Stat(beside); err != nil {
		t.Fatalf("%v: build baton-runner beside the baton binary (go build -o DIR ./cmd/baton ./cmd/baton-runner)", err)
	}
	h := newHarness(t)
	id := newRunID(t)
	h.submit(map[string]any{"runId": id, "profile": "fake", "args": []string{"--lines", "60", "--rate", "20"}})
	h.waitStatus(id, protocol.StatusStarted)
	b, err := os.ReadFile(filepath.Join(h.stateDir, "runs", id, "runner.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid := strings.TrimSpace(string(b))
	// runner-outer and, under it, the other stages and the agent.
	exes := map[string]bool{}
	var walk func(pid string)
	walk = func(pid string) {
		if exe, err := os.Readlink("/proc/" + pid + "/exe"); err == nil {
			exes[filepath.Base(exe)] = true
		}
		// Each thread has its own children (Go forks from any thread).
		tasks, _ := os.ReadDir("/proc/" + pid + "/task")
		for _, task := range tasks {
			kids, _ := os.ReadFile("/proc/" + pid + "/task/" + task.Name() + "/children")
			for _, k := range strings.Fields(string(kids)) {
				walk(k)
			}
		}
	}
	// The stages below runner-outer start after "started".
	testenv.WaitFor(t, 10*time.Second, "the agent", func() bool {
		clear(exes)
		walk(pid)
		for exe := range exes {
			if !strings.HasPrefix(exe, worker.RunnerName) {
				return true
			}
		}
		return false
	})
	var runners, batons int
	for exe := range exes {
		switch {
		case strings.HasPrefix(exe, worker.RunnerName):
			runners++
		case strings.HasPrefix(exe, "baton"):
			batons++
		}
	}
	if runners != 1 || batons != 1 {
		t.Fatalf("the run's processes run %v: want the chain from one %s and the agent from baton", exes, worker.RunnerName)
	}
	if st := h.terminal(id); st.Status != protocol.StatusSucceeded {
		t.Fatalf("terminal %+v", st)
	}
}

// TestRunOfWorkerDeadBeforeSpawn: a worker of another node took a job,
// created the run's record and died before spawning its runner (found by
// the chaos soak: such a run stayed "starting" for ever, since no node had
// its directory). The job's redelivery reaches a worker of this node,
// which takes the run over by compare-and-set and runs it. Had the dead
// worker marked the record spawning, its run directory would be on its own
// node, and this node leaves the run alone (I3).
func TestRunOfWorkerDeadBeforeSpawn(t *testing.T) {
	for _, tc := range []struct {
		name     string
		spawning bool
	}{{"never spawned", false}, {"spawning elsewhere", true}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			id := newRunID(t)
			// The dead worker: it took the job and created the record.
			job := h.takeJobThenStop(ctx, id)
			runs, err := kv.Open[kv.RunRecord](ctx, h.js, h.names.RunsBucket())
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now().UTC()
			if _, err := runs.Create(ctx, id, kv.RunRecord{RunID: id, State: kv.RunStarting, Node: "nA", Worker: "nA-dead",
				Profile: "fake", Attempt: 1, Deadline: now.Add(2 * time.Minute), CreatedAt: now,
				Spawning: tc.spawning}); err != nil {
				t.Fatal(err)
			}
			if err := job.Nak(); err != nil { // redelivered at once
				t.Fatal(err)
			}
			h.addWorker("w2")
			if !tc.spawning {
				if st := h.terminal(id); st.Status != protocol.StatusSucceeded || st.Node != "n1" {
					t.Fatalf("terminal %+v, want succeeded on n1", st)
				}
				// Respawned on n1 by w2, and the mark that guarded the
				// start is gone with it.
				if rec := h.record(id); rec.Node != "n1" || rec.Worker != "w2" || rec.Spawning {
					t.Fatalf("record %+v", rec)
				}
				return
			}
			h.waitJobsSettled("the redelivered job settled by w2")
			if _, err := os.Stat(filepath.Join(h.stateDir, "runs", id)); !os.IsNotExist(err) {
				t.Fatalf("this node started a run being spawned on another: %v", err)
			}
			if rec := h.record(id); rec.Node != "nA" || rec.State != kv.RunStarting {
				t.Fatalf("record %+v", rec)
			}
		})
	}
}

// TestWorkerStopsWhenItCannotConsume: a worker whose jobs consumer is
// deleted and taken (another consumer on its subjects) stops with the
// reason instead of heartbeating and taking nothing, and a worker started
// then fails at once.
func TestWorkerStopsWhenItCannotConsume(t *testing.T) {
	h := newHarness(t)
	h.stopWorker("w1")
	start := func() chan error {
		nc, _ := testenv.Connect(t, h.s)
		w, err := worker.New(nc, h.cfg, worker.WithStateDir(testenv.StateDir(t)), worker.WithNode("n2"),
			worker.WithBinary(testenv.BatonBinary(t)), worker.WithLogger(testLogger(t)))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		return done
	}
	stopped := func(done chan error) {
		t.Helper()
		select {
		case err := <-done:
			if !errors.Is(err, consumer.ErrCannotConsume) || !strings.Contains(err.Error(), "10100") {
				t.Fatalf("Run = %v, want ErrCannotConsume with err 10100", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the worker still runs 20s after its consumer was taken")
		}
	}
	done := start()
	testenv.WaitFor(t, 20*time.Second, "the worker's consumer", func() bool {
		_, err := h.js.Consumer(t.Context(), h.names.JobsStream(), consumer.DurableName)
		return err == nil
	})
	// The worker may recreate its consumer between the two calls: then
	// delete it again.
	testenv.WaitFor(t, 10*time.Second, "another consumer to take the jobs", func() bool {
		_ = h.js.DeleteConsumer(t.Context(), h.names.JobsStream(), consumer.DurableName)
		_, err := h.js.CreateConsumer(t.Context(), h.names.JobsStream(), jetstream.ConsumerConfig{
			Durable: "thief", FilterSubject: h.names.RunJobSubject(), AckPolicy: jetstream.AckExplicitPolicy,
		})
		return err == nil
	})
	stopped(done)
	stopped(start())
}

// TestFinishedRecordsExpireLiveOnesStay: a finished run's record expires
// after the record retention; a live run's record and its entry in the node
// index stay, and a finished run leaves no index entry.
func TestFinishedRecordsExpireLiveOnesStay(t *testing.T) {
	h := newHarness(t, withConfig(func(c *config.Config) { c.RecordRetention = 2 * time.Second }))
	ctx := t.Context()
	runs, err := kv.Open[kv.RunRecord](ctx, h.js, h.names.RunsBucket())
	if err != nil {
		t.Fatal(err)
	}
	index, err := h.js.KeyValue(ctx, h.names.NodeRunsBucket())
	if err != nil {
		t.Fatal(err)
	}
	live, done := newRunID(t), newRunID(t)
	h.submit(map[string]any{"runId": live, "profile": "fake", "args": []string{"--duration", "60s", "--rate", "5"}})
	h.submit(map[string]any{"runId": done, "profile": "fake", "args": []string{"--lines", "3"}})
	if st := h.terminal(done); st.Status != protocol.StatusSucceeded {
		t.Fatalf("terminal %+v", st)
	}
	h.waitStatus(live, protocol.StatusStarted)
	if _, err := index.Get(ctx, protocol.NodeRunKey("n1", live)); err != nil {
		t.Fatalf("the live run is not in the node index: %v", err)
	}
	testenv.WaitFor(t, 10*time.Second, "the finished run's index entry to go", func() bool {
		_, err := index.Get(ctx, protocol.NodeRunKey("n1", done))
		return errors.Is(err, jetstream.ErrKeyNotFound)
	})
	testenv.WaitFor(t, 15*time.Second, "the finished run's record to expire", func() bool {
		_, _, err := runs.Get(ctx, done)
		return errors.Is(err, kv.ErrNotFound)
	})
	// A record with the retention's TTL would be gone by then: the
	// finished one went sooner.
	testenv.WaitFor(t, 15*time.Second, "the live run's record to be older than twice the record retention", func() bool {
		e, err := runs.KV().Get(ctx, live)
		return err != nil || time.Since(e.Created()) > 2*h.cfg.RecordRetention
	})
	if rec, _, err := runs.Get(ctx, live); err != nil || rec.State != kv.RunRunning {
		t.Fatalf("the live run's record: %+v, %v", rec, err)
	}
	if _, err := index.Get(ctx, protocol.NodeRunKey("n1", live)); err != nil {
		t.Fatalf("the live run left the node index: %v", err)
	}
}

// TestReaperDropsStaleIndexEntries: entries of a vanished node whose runs
// ended, moved to another node or have no record are dropped by the reaper
// without touching the runs.
func TestReaperDropsStaleIndexEntries(t *testing.T) {
	// Waiting for the reaper's pass: beside the package's other such tests.
	t.Parallel()
	h := newHarness(t)
	ctx := t.Context()
	runs, err := kv.Open[kv.RunRecord](ctx, h.js, h.names.RunsBucket())
	if err != nil {
		t.Fatal(err)
	}
	index, err := h.js.KeyValue(ctx, h.names.NodeRunsBucket())
	if err != nil {
		t.Fatal(err)
	}
	code := 0
	recs := map[string]kv.RunRecord{
		"stale-ended": {RunID: "stale-ended", State: kv.RunState(protocol.StatusSucceeded), Node: "ghost", ExitCode: &code},
		"stale-moved": {RunID: "stale-moved", State: kv.RunStarting, Node: "n1"},
	}
	for id, rec := range recs {
		if _, err := runs.Create(ctx, id, rec); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"stale-ended", "stale-moved", "stale-norecord"} {
		if _, err := index.Put(ctx, protocol.NodeRunKey("ghost", id), nil); err != nil {
			t.Fatal(err)
		}
	}
	testenv.WaitFor(t, 40*time.Second, "the reaper to drop the ghost node's stale entries", func() bool {
		l, err := index.ListKeysFiltered(ctx, protocol.NodeRunKey("ghost", "*"))
		if err != nil {
			return false
		}
		n := 0
		for range l.Keys() {
			n++
		}
		return n == 0
	})
	for id, want := range recs {
		if got, _, err := runs.Get(ctx, id); err != nil || got.State != want.State || got.Node != want.Node {
			t.Fatalf("record %s after the reaper: %+v, %v; want it untouched", id, got, err)
		}
	}
}

// TestDiskLimitRun: a run that writes past its profile's limits.disk fails
// with a reason naming the limit, while a run beside it on the same node
// succeeds (a root worker; the sandbox's TestDiskLimit covers the rest).
func TestDiskLimitRun(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the disk bound is a filesystem per run, which only a root worker mounts: run as root")
	}
	h := newHarness(t, func(_ *server.Options, c *config.Config) {
		c.Profiles["fill"] = config.Profile{Command: []string{"/bin/sh", "-c"}, AllowArgs: config.AnyArgs,
			Timeout: time.Minute, Limits: config.Limits{Disk: 32 << 20}}
	})
	hog, ok := newRunID(t), newRunID(t)
	h.submit(map[string]any{"runId": hog, "profile": "fill", "args": []string{"for i in 1 2 3 4; do dd if=/dev/zero of=f$i bs=1M count=12 || exit 1; done"}})
	h.submit(map[string]any{"runId": ok, "profile": "fill", "args": []string{"for i in 1 2 3 4; do dd if=/dev/zero of=f$i bs=1M count=4 || exit 1; sleep 0.2; done; echo '{\"done\":true}'"}})
	if st := h.terminal(hog); st.Status != protocol.StatusFailed || !strings.Contains(st.Reason, "limits.disk") {
		t.Fatalf("the hog ended %s: %q; want failed naming limits.disk", st.Status, st.Reason)
	}
	if st := h.terminal(ok); st.Status != protocol.StatusSucceeded {
		t.Fatalf("the neighbour ended %s: %q", st.Status, st.Reason)
	}
}

// TestRecoveryLeavesARunBeingPrepared: a run whose starting worker lost
// its lease while preparing the sandbox (record starting, a run directory,
// no runner yet) is not taken over and failed by the node's recovery while
// that worker may still spawn its runner (found by the cluster chaos
// soak); past a job's redelivery it is settled as any other.
func TestRecoveryLeavesARunBeingPrepared(t *testing.T) {
	h := newHarness(t)
	h.stopWorker("w1")
	id := newRunID(t)
	runs, _ := runsStore(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now := time.Now().UTC()
	if _, err := runs.Create(ctx, id, kv.RunRecord{RunID: id, State: kv.RunStarting, Node: "n1", Worker: "n1-slow",
		Profile: "fake", Attempt: 1, Deadline: now.Add(time.Minute), CreatedAt: now, Spawning: true}); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(h.stateDir, "runs", id), 0o700); err != nil {
		t.Fatal(err)
	}
	const ackWait = 4 * time.Second
	prepared := time.Now()
	var log testenv.Buffer
	h.addWorker("w2", worker.WithAckWait(ackWait), worker.WithLogger(zerolog.New(&log)))
	// Its scans, at start and every half lease TTL, offer the run; it
	// leaves the run each time.
	testenv.WaitFor(t, 10*time.Second, "w2 to leave the run being prepared twice", func() bool {
		return logged(&log, id, "run being prepared, its runner not started yet; attach job dropped") >= 2
	})
	if rec := h.record(id); rec.State != kv.RunStarting {
		t.Fatalf("a run being prepared was taken over: record %+v", rec)
	}
	st := statuses(t, h.chain(id, 30*time.Second))
	if last := st[len(st)-1]; last.Status != protocol.StatusFailed {
		t.Fatalf("terminal %+v, want failed once no runner started", last)
	}
	if took := time.Since(prepared); took < ackWait {
		t.Fatalf("settled after %v, before a job's redelivery (%v)", took, ackWait)
	}
}

// TestStopWhilePreparingRedeliversTheJob: a worker stopped while it
// prepares a run's sandbox (here a mkfs.ext4 that hangs) has spawned no
// runner, and its run directory is gone: the job goes back to the stream
// and another worker runs it. (The cluster chaos once saw such a job
// acknowledged as if the runner were starting: the run never started.)
func TestStopWhilePreparingRedeliversTheJob(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("a bounded workspace is made by a root worker only: run as root")
	}
	h := newHarness(t)
	h.stopWorker("w1")
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "mkfs.ext4"), []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := os.Getenv("PATH")
	t.Setenv("PATH", bin+":"+path)
	_, stop := h.addWorker("slow")
	id := newRunID(t)
	h.submit(map[string]any{"runId": id, "profile": "fake", "args": []string{"--lines", "5"}})
	testenv.WaitFor(t, 20*time.Second, "the worker to be making the run's workspace", func() bool {
		_, err := os.Stat(filepath.Join(h.stateDir, "runs", id, "workspace.img"))
		return err == nil
	})
	stop()
	os.Setenv("PATH", path)
	h.addWorker("w2")
	if st := h.terminal(id); st.Status != protocol.StatusSucceeded {
		t.Fatalf("terminal %+v, want succeeded by the next worker", st)
	}
}

// TestRedeliveredJobOfEndedRunStartsNothing: a job redelivered for a run
// whose record still says starting but whose chain already ended (a
// take-over settled it and its record write was lost) starts no agent and
// adds nothing after the terminal status (I3, I5; the single-server chaos
// soak saw a run started again after its "failed").
func TestRedeliveredJobOfEndedRunStartsNothing(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id := newRunID(t)
	job := h.takeJobThenStop(ctx, id)
	runs, err := kv.Open[kv.RunRecord](ctx, h.js, h.names.RunsBucket())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if _, err := runs.Create(ctx, id, kv.RunRecord{RunID: id, State: kv.RunStarting, Node: "n1", Worker: "n1-dead",
		Profile: "fake", Attempt: 1, Deadline: now.Add(2 * time.Minute), CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	ended := publisher.NewChain(h.js, h.names, id, 0, publisher.WithEpoch(1))
	if err := ended.PublishStatus(ctx, protocol.Status{Status: protocol.StatusFailed, RunID: id, Reason: "settled by a take-over"}); err != nil {
		t.Fatal(err)
	}
	if err := job.Nak(); err != nil { // redelivered at once
		t.Fatal(err)
	}
	h.addWorker("w2")
	testenv.WaitFor(t, 15*time.Second, "the record to take the chain's end", func() bool {
		return h.record(id).State == kv.RunState(protocol.StatusFailed)
	})
	h.waitJobsSettled("the redelivered job settled by w2")
	if msgs := h.chain(id, 5*time.Second); len(msgs) != 1 {
		t.Fatalf("the chain holds %d messages after its terminal status, want it alone", len(msgs))
	}
	if _, err := os.Stat(filepath.Join(h.stateDir, "runs", id, "journal.ndjson")); !os.IsNotExist(err) {
		t.Fatalf("an agent was started for an ended run: %v", err)
	}
}

// takeJobThenStop stops the harness's worker, submits a job for runID and
// fetches it as a worker that then dies would: the job is delivered and
// unacknowledged, and no worker runs.
func (h *harness) takeJobThenStop(ctx context.Context, runID string) jetstream.Msg {
	t := h.t
	t.Helper()
	var cons jetstream.Consumer
	testenv.WaitFor(t, 10*time.Second, "the jobs consumer", func() bool {
		var err error
		cons, err = h.js.Consumer(ctx, h.names.JobsStream(), "workers")
		return err == nil
	})
	h.stopWorker("w1")
	// Past the pull requests w1 left waiting (its fetch wait is 2 s): they
	// would take the job into the void.
	testenv.WaitFor(t, 10*time.Second, "the pull requests of the stopped worker to end", func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.NumWaiting == 0
	})
	h.submit(map[string]any{"runId": runID, "profile": "fake", "args": []string{"--lines", "20"}})
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var job jetstream.Msg
	for m := range batch.Messages() {
		job = m
	}
	if job == nil {
		t.Fatalf("no job fetched: %v", batch.Error())
	}
	return job
}

// TestRecoveryLeavesAHalfPreparedRunToItsJob: a run whose worker died
// while preparing its directory, before the spawning mark (record
// starting, a directory without its spec, old enough to be judged), is its
// job's: the node's recovery does not fail it, and the job's redelivery
// starts it afresh. (The single-server chaos soak saw such runs failed
// with "cannot read the run's spec" by a recovery that came first.)
func TestRecoveryLeavesAHalfPreparedRunToItsJob(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id := newRunID(t)
	job := h.takeJobThenStop(ctx, id)
	runs, _ := runsStore(t, h)
	now := time.Now().UTC()
	if _, err := runs.Create(ctx, id, kv.RunRecord{RunID: id, State: kv.RunStarting, Node: "n1", Worker: "n1-dead",
		Profile: "fake", Attempt: 1, Deadline: now.Add(2 * time.Minute), CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(h.stateDir, "runs", id)
	if err := os.MkdirAll(filepath.Join(dir, "workspace"), 0o700); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(dir, old, old); err != nil {
		t.Fatal(err)
	}
	// The recovery scans at once; the job comes back a little later.
	if err := job.NakWithDelay(4 * time.Second); err != nil {
		t.Fatal(err)
	}
	h.addWorker("w2")
	if st := h.terminal(id); st.Status != protocol.StatusSucceeded {
		t.Fatalf("terminal %+v, want succeeded, started afresh by the job's redelivery", st)
	}
}

// TestRecoveryRespawnsARunnerThatNeverTookTheRun: a run marked spawning
// whose runner never took it (its worker stopped while the runner started,
// and the runner died before taking the run) is not lost: its job is
// acknowledged, so the node's recovery spawns the runner again and the run
// is published whole.
func TestRecoveryRespawnsARunnerThatNeverTookTheRun(t *testing.T) {
	// Spawned as a runner, it reports nothing and exits.
	testRespawn(t, "#!/bin/sh\nsleep 2\n")
}

// TestRecoveryRespawnMeetsALateRunner: the same, but the first runner was
// only slow (a loaded node): it takes the run while the recovery respawns
// one. Whichever gets the run's lock runs the agent, once, and the run is
// published whole (the cluster chaos soak saw such runs failed with
// "another runner holds the run's lock" while their agent ran).
func TestRecoveryRespawnMeetsALateRunner(t *testing.T) {
	// The first runner takes the run 5 s after it was spawned; the
	// recovery respawns one at about 4 s, which is slower still.
	slow := func(d int) string {
		return fmt.Sprintf("#!/bin/sh\nsleep %d\nexec %s \"$@\"\n", d, testenv.BatonBinary(t))
	}
	testRespawn(t, slow(5), worker.WithRunner(runnerScript(t, slow(3))))
}

func runnerScript(t *testing.T, script string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "runner")
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

func testRespawn(t *testing.T, runner string, successor ...worker.Option) {
	h := newHarness(t)
	h.stopWorker("w1")
	bin := runnerScript(t, runner)
	_, stop := h.addWorker("doomed", worker.WithRunner(bin))
	id := newRunID(t)
	h.submit(map[string]any{"runId": id, "profile": "fake", "args": []string{"--lines", "30"}})
	runs, _ := runsStore(t, h)
	testenv.WaitFor(t, 20*time.Second, "the run to be marked spawning", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		rec, _, err := runs.Get(ctx, id)
		return err == nil && rec.Spawning
	})
	stop()
	if rec := h.record(id); rec.State != kv.RunStarting {
		t.Fatalf("record %+v after its worker stopped, want starting", rec)
	}
	h.addWorker("w2", append([]worker.Option{worker.WithAckWait(time.Second)}, successor...)...)
	msgs := h.chain(id, 40*time.Second)
	st := statuses(t, msgs)
	if last := st[len(st)-1]; last.Status != protocol.StatusSucceeded {
		t.Fatalf("terminal %+v, want succeeded after the runner was respawned", last)
	}
	lines := len(msgs) - len(st)
	if lines < 30 {
		t.Fatalf("the chain holds %d lines, want the agent's 30", lines)
	}
}

// TestStartMovedToAnotherNodeIsCleaned: the directory a worker of this
// node left while starting a run that another node's worker then took over
// and ran is removed by the node's recovery scan (nothing else would: it
// never gets a finished marker), while a run of this node being prepared
// the same way is left alone.
func TestStartMovedToAnotherNodeIsCleaned(t *testing.T) {
	h := newHarness(t)
	h.stopWorker("w1")
	runs, _ := runsStore(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now := time.Now().UTC()
	moved, ours := newRunID(t), newRunID(t)
	for id, node := range map[string]string{moved: "n2", ours: "n1"} {
		if _, err := runs.Create(ctx, id, kv.RunRecord{RunID: id, State: kv.RunStarting, Node: node, Worker: node + "-w",
			Profile: "fake", Attempt: 1, Deadline: now.Add(time.Minute), CreatedAt: now}); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(h.stateDir, "runs", id)
		if err := os.MkdirAll(filepath.Join(dir, "workspace"), 0o700); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-time.Hour)
		if err := os.Chtimes(dir, old, old); err != nil {
			t.Fatal(err)
		}
	}
	h.addWorker("w2")
	testenv.WaitFor(t, 15*time.Second, "the moved start's directory to be removed", func() bool {
		_, err := os.Lstat(filepath.Join(h.stateDir, "runs", moved))
		return os.IsNotExist(err)
	})
	if _, err := os.Lstat(filepath.Join(h.stateDir, "runs", ours)); err != nil {
		t.Fatalf("the directory of this node's starting run was removed: %v", err)
	}
}

// TestRedeliveredJobWhileStartingStartsOnce: a job redelivered (AckWait
// passed) to the worker still preparing its run, whose lease was lost
// meanwhile, starts the run once. Found by the cluster chaos soak (seed
// 1796138333941547334): on a loaded node the redelivery took the run over
// from the same worker's first start, whose mark then passed for its own
// (same worker, same node) and spawned a second runner; that one found
// the run locked and the run was failed while the first one's agent ran.
func TestRedeliveredJobWhileStartingStartsOnce(t *testing.T) {
	h := newHarness(t)
	h.stopWorker("w1")
	ctx := t.Context()
	leases, err := h.js.KeyValue(ctx, h.names.LeasesBucket())
	if err != nil {
		t.Fatal(err)
	}
	id := newRunID(t)
	var calls atomic.Int32
	second, firstGone := make(chan struct{}), make(chan struct{})
	h.addWorker("w2", worker.WithAckWait(time.Second), worker.WithBeforeMark(func(runID string) {
		if runID != id {
			return
		}
		if calls.Add(1) > 1 {
			// The second start, having taken the run over, lets the
			// first one go on to its mark first. (A start of a run under
			// way holds its redelivery back, so that one has ended.)
			close(second)
			select {
			case <-firstGone:
			case <-time.After(10 * time.Second):
				t.Error("the first start never went on to its mark")
			}
			return
		}
		defer close(firstGone)
		// The first start loses its lease while it prepares, and
		// prepares past AckWait.
		if err := leases.Delete(ctx, id); err != nil {
			t.Error(err)
		}
		select {
		case <-second:
		case <-time.After(5 * time.Second):
		}
	}))
	// Lines for 3 s: a second runner's failure would come while the run is live.
	h.submit(map[string]any{"runId": id, "profile": "fake", "args": []string{"--lines", "30", "--rate", "10"}})
	msgs := h.chain(id, 40*time.Second)
	st := statuses(t, msgs)
	if last := st[len(st)-1]; last.Status != protocol.StatusSucceeded {
		t.Fatalf("terminal %+v, want succeeded: one start, one runner", last)
	}
	if n := h.assertChainMatchesJournal(id, msgs); n < 30 {
		t.Fatalf("the chain holds %d lines, want the agent's 30", n)
	}
}

// TestRecordNamesItsHolder: the run record names the worker that holds the
// run, after a hand-off too, and so does a cancel's reply; its spawning
// mark, which only guards the start, is gone once the run runs and when it
// ends.
func TestRecordNamesItsHolder(t *testing.T) {
	h := newHarness(t)
	_, stopSecond := h.addWorker("w2")
	defer stopSecond()
	id := newRunID(t)
	h.submit(map[string]any{"runId": id, "profile": "fake", "args": []string{"--lines", "3000", "--rate", "100", "--seed", "7"}})
	holder := h.waitStatus(id, protocol.StatusStarted).Worker
	holds := func(worker string) func() bool {
		return func() bool {
			rec := h.record(id)
			return rec.State == kv.RunRunning && rec.Worker == worker && !rec.Spawning
		}
	}
	testenv.WaitFor(t, 10*time.Second, "the record to say running, held by "+holder+", not spawning", holds(holder))
	h.waitLines(id, 40)
	h.stopWorker(holder)
	next := h.waitStatus(id, protocol.StatusAttached).Worker
	testenv.WaitFor(t, 10*time.Second, "the record to name "+next+", which took the run over", holds(next))
	// baton cancel's reply names the holder too.
	c, err := client.New(h.js, h.names)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if rep, err := c.Cancel(ctx, id); err != nil || rep.Worker != next {
		t.Fatalf("cancel's reply %+v (%v), want it to name %s", rep, err, next)
	}
	if st := h.terminal(id); st.Status != protocol.StatusCancelled {
		t.Fatalf("run ended %+v", st)
	}
	// The record is written after the terminal status is on the chain.
	var rec kv.RunRecord
	testenv.WaitFor(t, 10*time.Second, "the record to say cancelled", func() bool {
		rec = h.record(id)
		return rec.State.Terminal()
	})
	if rec.State != kv.RunState(protocol.StatusCancelled) || rec.Spawning || rec.Worker != next {
		t.Fatalf("record of the finished run: %+v", rec)
	}
}

// TestOwnJobCountedFirstStartsTheRun: a job whose run's record (state
// starting, its worker gone before its runner started) keeps this very
// job starts the run, even delivered as a first time, as a server
// restarted from an older consumer state delivers it; it is no duplicate
// of itself (a soak's run was rejected so and never ran). A different job
// of the same runId is still one (TestDuplicateRunIDStartsNothing).
func TestOwnJobCountedFirstStartsTheRun(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	id := newRunID(t)
	job := protocol.Job{RunID: id, Profile: "fake", Args: []string{"--lines", "5"}}
	kept, err := protocol.EncodeWorkerJob(job)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := kv.Open[kv.RunRecord](ctx, h.js, h.names.RunsBucket())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if _, err := runs.Create(ctx, id, kv.RunRecord{RunID: id, State: kv.RunStarting, Node: "gone", Worker: "gone-1",
		Profile: "fake", Attempt: 1, Deadline: now.Add(2 * time.Minute), CreatedAt: now, Job: kept}); err != nil {
		t.Fatal(err)
	}
	h.submit(map[string]any{"runId": id, "profile": "fake", "args": []string{"--lines", "5"}})
	msgs := h.chain(id, 30*time.Second)
	st, err := protocol.ParseStatus(msgs[len(msgs)-1].Data())
	if err != nil || st.Status != protocol.StatusSucceeded {
		t.Fatalf("the run's last message %q (%v), want its succeeded status", msgs[len(msgs)-1].Data(), err)
	}
	h.waitJobsSettled("the job settled")
	dlq, err := h.js.Stream(ctx, h.names.DLQStream())
	if err != nil {
		t.Fatal(err)
	}
	if info, err := dlq.Info(ctx); err != nil || info.State.Msgs != 0 {
		t.Fatalf("the DLQ: %+v (%v), want it empty: the run's own job was taken for a duplicate", info.State, err)
	}
}
