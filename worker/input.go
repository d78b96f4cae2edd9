package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/journal/follow"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox"
)

const (
	// inputTimeout bounds the work of answering one input request.
	inputTimeout = 5 * time.Second
	// inputPoll is how often a run's feeder looks for input it was not
	// told of (a notice lost while the connection was down).
	inputPoll = time.Second
	// inputWriteTimeout bounds one hand-over to the runner, which answers
	// once the agent's stdin pipe took the bytes; past it the feeder
	// connects again and the runner skips what it already wrote.
	inputWriteTimeout = 30 * time.Second
)

// errInputClosed refuses input to a run whose stdin an earlier message
// closed.
var errInputClosed = errors.New("stdin was closed by an earlier end-of-input message")

// handleInput answers an input request: it checks the run and the message,
// stores the message on the run's input subject, right after the run's
// previous message (compare-and-set on the subject's last sequence), tells
// the workers, and replies with its sequence (protocol.InputReply) or a
// refusal with one of the protocol's input error codes.
func (w *Worker) handleInput(ctx context.Context, req micro.Request) {
	if n := len(req.Data()); n > int(w.cfg.MaxInputBytes) {
		_ = req.Error(protocol.InputTooLarge, fmt.Sprintf("input of %d bytes is over maxInputBytes (%d)", n, w.cfg.MaxInputBytes), nil)
		return
	}
	life := ctx // the worker's: the notice outlives the request
	// A request taken is answered even while the worker stops: its sender
	// would otherwise not know whether the input was stored.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), inputTimeout)
	defer cancel()
	runID, rec, ok := w.inputRun(ctx, req)
	if !ok {
		return
	}
	eof := req.Headers().Get(protocol.HeaderInputEOF) == "true"
	seq, code, desc := w.acceptInput(ctx, life, runID, rec, req.Data(), eof, req.Headers().Get(nats.MsgIdHdr))
	if code != "" {
		_ = req.Error(code, desc, nil)
		return
	}
	b, _ := json.Marshal(protocol.InputReply{RunID: runID, Seq: seq})
	_ = req.Respond(b)
}

// acceptInput stores data as the next input of runID (its record rec,
// not ended) and tells its holder, within life; a refusal is an input
// error code and its description.
func (w *Worker) acceptInput(ctx, life context.Context, runID string, rec kv.RunRecord, data []byte, eof bool, msgID string) (uint64, string, string) {
	if !rec.Interactive {
		return 0, protocol.InputNotStream, fmt.Sprintf("run %s takes no input: its profile %q has stdin \"once\" (set stdin: stream)", runID, rec.Profile)
	}
	seq, prev, fresh, err := w.storeInput(ctx, runID, data, eof, nil, msgID)
	switch {
	case errors.Is(err, errInputClosed):
		return 0, protocol.InputTerminal, fmt.Sprintf("run %s: %v", runID, err)
	case err != nil:
		w.log.Warn().Err(err).Str("run_id", runID).Msg("store input")
		return 0, protocol.InputFailed, "cannot store the input: " + err.Error()
	}
	w.tellInput(life, runID, fresh, sandbox.InputMessage{Seq: seq, Prev: prev.seq, EOF: prev.eof, Data: data})
	return seq, "", ""
}

// inputRun reads the record of the run an input or interrupt request is
// for, answering the request with the refusal if there is none or it
// ended.
func (w *Worker) inputRun(ctx context.Context, req micro.Request) (string, kv.RunRecord, bool) {
	runID := req.Subject()[strings.LastIndexByte(req.Subject(), '.')+1:]
	if !protocol.ValidRunID(runID) {
		_ = req.Error(protocol.InputBadRunID, fmt.Sprintf("runId %q must match [A-Za-z0-9_-]{1,128}", runID), nil)
		return "", kv.RunRecord{}, false
	}
	// A run held here, its feeder running, is not terminal: its record
	// need not be read (what it says of the run's input does not change).
	w.mu.Lock()
	r := w.active[runID]
	_, feeding := w.inputPokes[runID]
	w.mu.Unlock()
	if r != nil && feeding && r.rec.RunID == runID {
		return runID, r.rec, true
	}
	rec, _, err := w.runs.Get(ctx, runID)
	switch {
	case errors.Is(err, kv.ErrNotFound):
		_ = req.Error(protocol.InputNotFound, "no run "+runID, nil)
		return "", kv.RunRecord{}, false
	case err != nil:
		_ = req.Error(protocol.InputFailed, "cannot read the run's record: "+err.Error(), nil)
		return "", kv.RunRecord{}, false
	case rec.State.Terminal():
		_ = req.Error(protocol.InputTerminal, fmt.Sprintf("run %s is %s", runID, rec.State), nil)
		return "", kv.RunRecord{}, false
	}
	return runID, rec, true
}

// interruptHeader marks a stored input as an interrupt.
var interruptHeader = nats.Header{protocol.HeaderInputKind: {protocol.InputKindInterrupt}}

// storeInput appends data to runID's input messages, each linked to the
// one before it (HeaderInputPrev) by the server's check of the subject's
// last sequence, so concurrent senders are ordered and none is skipped.
// msgID, if set, dedupes a client's retry.
//
// The run's last message is read from the stream only when this worker
// does not know it (inputTails: the last it stored itself); a stale one
// (another worker stored since) fails the server's check, and the store
// reads it and goes after it, as with a concurrent sender.
//
// An interrupt is stored after an end-of-input too (SIGINT needs no
// stdin), carrying the end-of-input mark on, so input after it is still
// refused.
//
// It returns the message's sequence and, when it stored it now (fresh;
// not a retry's duplicate), the sequence of the one before it with the
// message's own end-of-input mark: what the runner is handed.
func (w *Worker) storeInput(ctx context.Context, runID string, data []byte, eof bool, kind nats.Header, msgID string) (seq uint64, prev inputTail, fresh bool, err error) {
	interrupt := kind.Get(protocol.HeaderInputKind) == protocol.InputKindInterrupt
	s, err := w.inputStreamHandle(ctx)
	if err != nil {
		return 0, inputTail{}, false, err
	}
	subj := w.names.InputStoreSubject(runID)
	tail, known := w.inputTail(runID)
	for attempt := 1; ; attempt++ {
		if !known {
			last, err := s.GetLastMsgForSubject(ctx, subj)
			switch {
			case errors.Is(err, jetstream.ErrMsgNotFound):
				tail = inputTail{}
			case err != nil:
				return 0, inputTail{}, false, err
			default:
				tail = inputTail{seq: last.Sequence, eof: last.Header.Get(protocol.HeaderInputEOF) == "true"}
			}
		}
		if tail.eof && !interrupt {
			return 0, inputTail{}, false, errInputClosed
		}
		m := nats.NewMsg(subj)
		m.Data = data
		m.Header.Set(protocol.HeaderInputPrev, strconv.FormatUint(tail.seq, 10))
		eofNow := eof || tail.eof
		if eofNow {
			m.Header.Set(protocol.HeaderInputEOF, "true")
		}
		for k, v := range kind {
			m.Header[k] = v
		}
		if msgID != "" {
			m.Header.Set(nats.MsgIdHdr, runID+":input:"+msgID)
		}
		ack, err := w.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(tail.seq))
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence && attempt < 10 {
			known = false // another worker's message went first: go after it
			continue
		}
		if err != nil {
			w.forgetInputTail(runID)
			return 0, inputTail{}, false, err
		}
		if ack.Duplicate {
			// A retry of a message stored before: not necessarily the
			// last one, nor right after tail.
			w.forgetInputTail(runID)
			return ack.Sequence, inputTail{}, false, nil
		}
		w.setInputTail(runID, inputTail{seq: ack.Sequence, eof: eofNow})
		return ack.Sequence, inputTail{seq: tail.seq, eof: eofNow}, true, nil
	}
}

// inputTail is the last input message of a run: its sequence (0: none)
// and whether it closed stdin.
type inputTail struct {
	seq uint64
	eof bool
}

// maxInputTails bounds inputTails: past it the map starts again (a tail
// forgotten costs one read).
const maxInputTails = 4096

func (w *Worker) inputTail(runID string) (inputTail, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.inputTails[runID]
	return t, ok
}

func (w *Worker) setInputTail(runID string, t inputTail) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.inputTails == nil || len(w.inputTails) >= maxInputTails {
		w.inputTails = map[string]inputTail{}
	}
	w.inputTails[runID] = t
}

func (w *Worker) forgetInputTail(runID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.inputTails, runID)
}

// inputHints are the messages this worker stored for a run it holds, for
// its feeder: handed over, they need no read from the stream. Only a
// hint: one missing (dropped past maxHints, or stored by another worker)
// is read from the stream as before.
type inputHints struct {
	mu   sync.Mutex
	msgs []sandbox.InputMessage
}

const maxHints = 64

func (h *inputHints) add(m sandbox.InputMessage) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.msgs) < maxHints {
		h.msgs = append(h.msgs, m)
	}
}

// next returns the message right after last, if it is there, dropping
// those at or before last.
func (h *inputHints) next(last uint64) (sandbox.InputMessage, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var found sandbox.InputMessage
	ok := false
	keep := h.msgs[:0]
	for _, m := range h.msgs {
		switch {
		case m.Seq <= last:
		case m.Prev == last && !ok:
			found, ok = m, true
		default:
			keep = append(keep, m)
		}
	}
	clear(h.msgs[len(keep):])
	h.msgs = keep
	return found, ok
}

// inputStreamHandle is the input stream's handle, looked up once: its
// reads and the store's publish name the stream, nothing more.
func (w *Worker) inputStreamHandle(ctx context.Context) (jetstream.Stream, error) {
	w.mu.Lock()
	s := w.inputStream
	w.mu.Unlock()
	if s != nil {
		return s, nil
	}
	s, err := w.js.Stream(ctx, w.names.InputStream())
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.inputStream = s
	w.mu.Unlock()
	return s, nil
}

// tellInput wakes the feeder of runID: at once when it is held here,
// handing it m (just stored) so it need not read it back, else by a
// notice to its holder (notify).
func (w *Worker) tellInput(life context.Context, runID string, fresh bool, m sandbox.InputMessage) {
	w.mu.Lock()
	ch := w.inputPokes[runID]
	if hs := w.inputHints[runID]; hs != nil && fresh {
		hs.add(m)
	}
	w.mu.Unlock()
	if ch != nil {
		poke(ch)
		return
	}
	w.notify(life, w.names.InputNoticeSubject(runID))
}

// inputNotices wakes the feeder of a run held here when another worker
// stored input for it, and every feeder when the connection comes back.
// Feeders look for input on their own every noticeSweep.
func (w *Worker) inputNotices() noticeWatcher {
	feeder := func(runID string) chan struct{} {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.inputPokes[runID]
	}
	return noticeWatcher{
		nc: w.nc, subject: w.names.InputNotices(), what: "input", log: w.log, clock: w.clock,
		held:     func(runID string) bool { return feeder(runID) != nil },
		onNotice: func(_ context.Context, runID string) { poke(feeder(runID)) },
		onSweep: func(context.Context) {
			w.mu.Lock()
			defer w.mu.Unlock()
			for _, ch := range w.inputPokes {
				poke(ch)
			}
		},
		// One timer for the worker, not one per feeder: an idle run has
		// nothing that wakes for it.
		every: w.noticeSweep(),
	}
}

// poke wakes a feeder, if there is one and it is not woken already (it
// reads every message after its last).
func poke(ch chan struct{}) {
	if ch == nil {
		return
	}
	select {
	case ch <- struct{}{}:
	default:
	}
}

// handleInterrupt answers an interrupt request like an input request
// (protocol.InputReply or a refusal with an input error code): the
// interrupt is stored in order with the run's input, and the runner
// interrupts the agent as its profile says. Any unfinished run takes one.
func (w *Worker) handleInterrupt(ctx context.Context, req micro.Request) {
	life := ctx // the worker's: the notice outlives the request
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), inputTimeout)
	defer cancel()
	runID, _, ok := w.inputRun(ctx, req)
	if !ok {
		return
	}
	seq, prev, fresh, err := w.storeInput(ctx, runID, nil, false, interruptHeader, req.Headers().Get(nats.MsgIdHdr))
	if err != nil {
		w.log.Warn().Err(err).Str("run_id", runID).Msg("store interrupt")
		_ = req.Error(protocol.InputFailed, "cannot store the interrupt: "+err.Error(), nil)
		return
	}
	w.tellInput(life, runID, fresh, sandbox.InputMessage{Seq: seq, Prev: prev.seq, EOF: prev.eof, Interrupt: true})
	b, _ := json.Marshal(protocol.InputReply{RunID: runID, Seq: seq})
	_ = req.Respond(b)
}

// startInput starts the feeder of r if its runner takes input; stop ends it
// and waits for it.
func (w *Worker) startInput(ctx context.Context, r *run) (stop func()) {
	if !exists(filepath.Join(string(r.dir), journal.InputSocketName)) {
		return func() {}
	}
	poke := make(chan struct{}, 1)
	w.mu.Lock()
	if w.inputPokes == nil {
		w.inputPokes = map[string]chan struct{}{}
	}
	w.inputPokes[r.id] = poke
	hints := &inputHints{}
	if w.inputHints == nil {
		w.inputHints = map[string]*inputHints{}
	}
	w.inputHints[r.id] = hints
	w.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.feedInput(ctx, r, poke, hints)
	}()
	return func() {
		cancel()
		<-done
		w.mu.Lock()
		delete(w.inputPokes, r.id)
		delete(w.inputHints, r.id)
		w.mu.Unlock()
	}
}

// feedInput hands r's stored input messages to its runner, from the one
// after the last the runner wrote (it says which on connecting), until the
// runner's stdin closes, the runner ends, or ctx ends. The runner writes
// a message only right after its predecessor and never twice, so a
// successor (after a hand-off or a crash) goes on exactly where the agent
// is.
//
// A message this worker stored comes as a hint (inputHints) and is
// written without a read from the stream.
func (w *Worker) feedInput(ctx context.Context, r *run, poke <-chan struct{}, hints *inputHints) {
	// wait returns when poked, or after d if d > 0 (a retry after an
	// error); d == 0 waits for a poke alone.
	wait := func(d time.Duration) bool {
		var tc <-chan time.Time
		if d > 0 {
			t := time.NewTimer(d)
			defer t.Stop()
			tc = t.C
		}
		select {
		case <-ctx.Done():
			return false
		case <-poke:
		case <-tc:
		}
		return true
	}
	var conn *sandbox.InputConn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	var stream jetstream.Stream
	for ctx.Err() == nil {
		if stream == nil {
			sctx, cancel := context.WithTimeout(ctx, inputTimeout)
			s, err := w.inputStreamHandle(sctx)
			cancel()
			if err != nil {
				r.log.Debug().Err(err).Msg("look up the input stream")
				wait(inputPoll)
				continue
			}
			stream = s
		}
		if conn == nil {
			// The runner answers once its sandbox runs, which on a
			// loaded node can take longer than a request.
			dctx, cancel := context.WithTimeout(ctx, inputWriteTimeout)
			c, err := sandbox.DialInput(dctx, r.dir)
			cancel()
			if errors.Is(err, sandbox.ErrNoInput) {
				return // the runner ended
			}
			if err != nil {
				r.log.Warn().Err(err).Msg("connect to the runner's input socket")
				wait(inputPoll)
				continue
			}
			conn = c
		}
		last := conn.State().Last
		im, ok := hints.next(last)
		if !ok {
			var pause time.Duration
			if im, pause, ok = w.storedInput(ctx, r, stream, last); !ok {
				wait(pause)
				continue
			}
		}
		wctx, cancel := context.WithTimeout(ctx, inputWriteTimeout)
		st, err := conn.Write(wctx, im)
		cancel()
		switch {
		case err == nil:
			w.metrics.inputsWritten.Inc()
		case errors.Is(err, sandbox.ErrInputRefused) && st.Last >= im.Seq:
			// Passed over: the agent's stdin had closed.
			r.log.Warn().Uint64("seq", im.Seq).Str("why", st.Error).Msg("input not written: the agent's stdin is closed")
		case errors.Is(err, sandbox.ErrInputRefused):
			r.log.Warn().Err(err).Uint64("seq", im.Seq).Msg("runner refused input")
			wait(inputPoll)
		default:
			r.log.Debug().Err(err).Uint64("seq", im.Seq).Msg("hand input to the runner; reconnecting")
			conn.Close()
			conn = nil
		}
	}
}

// storedInput reads r's input stored next after sequence last from
// stream. When there is none yet, or it cannot be read, ok is false and
// pause is how long to wait before looking again (0: until poked).
func (w *Worker) storedInput(ctx context.Context, r *run, stream jetstream.Stream, last uint64) (im sandbox.InputMessage, pause time.Duration, ok bool) {
	gctx, cancel := context.WithTimeout(ctx, inputTimeout)
	m, err := stream.GetMsg(gctx, last+1, jetstream.WithGetMsgSubject(w.names.InputStoreSubject(r.id)))
	cancel()
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		// Told of new input by a notice (notice.go); the input notices'
		// sweep, every noticeSweep, pokes every feeder for one no retry
		// delivered.
		return im, 0, false
	}
	if err != nil {
		r.log.Debug().Err(err).Msg("read the run's next input")
		return im, inputPoll, false
	}
	prev, err := strconv.ParseUint(m.Header.Get(protocol.HeaderInputPrev), 10, 64)
	if err != nil {
		// Only workers store there; a message without the link cannot be
		// placed.
		r.log.Error().Uint64("seq", m.Sequence).Msg("stored input has no valid " + protocol.HeaderInputPrev)
		return im, inputPoll, false
	}
	return sandbox.InputMessage{Seq: m.Sequence, Prev: prev,
		EOF:       m.Header.Get(protocol.HeaderInputEOF) == "true",
		Interrupt: m.Header.Get(protocol.HeaderInputKind) == protocol.InputKindInterrupt,
		Data:      m.Data, Headers: decisionHeaders(m.Header)}, 0, true
}

// decisionHeaders are the headers of a stored input of baton's own (an
// approval's answer, a follow-up turn) that the chain carries; nil for a
// client's input or an interrupt.
func decisionHeaders(h nats.Header) map[string]string {
	if k := h.Get(protocol.HeaderInputKind); k == "" || k == protocol.InputKindInterrupt {
		return nil
	}
	m := make(map[string]string, len(protocol.DecisionHeaders))
	for _, k := range protocol.DecisionHeaders {
		if v := h.Get(k); v != "" {
			m[k] = v
		}
	}
	return m
}

// isRecord reports whether l is one of the runner's records, not the
// agent's line: of an input it wrote, or of a connection its egress
// proxy decided.
func (r *run) isRecord(l follow.Line) bool {
	_, ok := journal.ParseInputRecord(l.Data, r.nonce)
	if !ok {
		_, ok = r.egressRecord(l)
	}
	return ok
}

// egressRecord decodes l if it is the runner's record of a connection.
func (r *run) egressRecord(l follow.Line) (journal.EgressRecord, bool) {
	return journal.ParseEgressRecord(l.Data, r.nonce)
}

// publishInput puts the input record l on the chain as an input message.
func (r *run) publishInput(ctx context.Context, l follow.Line) error {
	rec, _ := journal.ParseInputRecord(l.Data, r.nonce)
	return r.chain.PublishInput(ctx, rec, l.End)
}
