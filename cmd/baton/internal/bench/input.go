package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/protocol"
)

const inputTarget = "p99 ≤ 5 ms at 100 messages/s"

// echoLine is what EchoAgent writes for each input line it reads.
type echoLine struct {
	Type string `json:"type"` // "bench-input"
	Seq  uint64 `json:"seq"`
	Sent int64  `json:"sent"` // when the sender called send, Unix ns
	Read int64  `json:"read"` // when the agent had the line, Unix ns
}

// EchoAgent reads input lines "<seq> <sent>" from r (the agent's stdin)
// until EOF and answers each on w with the time it read it:
//
//	{"type":"bench-input","seq":1,"sent":1764430000123456789,"read":1764430000125456789}
func EchoAgent(r io.Reader, w io.Writer) error {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		read := time.Now().UnixNano()
		seqS, sentS, ok := strings.Cut(sc.Text(), " ")
		seq, err1 := strconv.ParseUint(seqS, 10, 64)
		sent, err2 := strconv.ParseInt(sentS, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return fmt.Errorf("bench: input line %.60q is not \"<seq> <sent>\"", sc.Text())
		}
		b, _ := json.Marshal(echoLine{Type: "bench-input", Seq: seq, Sent: sent, Read: read})
		if _, err := w.Write(append(b, '\n')); err != nil {
			return err
		}
	}
	return sc.Err()
}

// input: baton send → the line readable on the agent's stdin. A run of
// the echo agent (stdin stream) gets messages at a steady rate; each
// carries the time its send began, and the agent answers with the time it
// read it. Every message must come back once, in order.
func (e *env) input(ctx context.Context, sz sizes) []Result {
	if _, err := e.startWorker(ctx, "input", 4); err != nil {
		return failed("input", inputTarget, err)
	}
	return e.measureInput(ctx, sz, "input", "bench-input", "")
}

// firstInputTarget is the bound on the first input of a stream run.
const firstInputTarget = 50 * time.Millisecond

// measureInput runs the input measurement on whatever worker takes the
// runs: first sz.inputFirsts short runs, each sent one message the moment
// its started status arrives (the first input of a run: sent → the
// agent's read), then one run of sz.inputMsgs messages at inputRate, whose
// first message is a warm-up left out of the steady state.
func (e *env) measureInput(ctx context.Context, sz sizes, row, runID, load string) []Result {
	target := inputTarget + fmt.Sprintf("; first input ≤ %s after started", ms(firstInputTarget))
	if load != "" {
		target += ", " + load
	}
	fail := func(err error) []Result { return failed(row, target, err) }
	var firsts []time.Duration
	for i := range sz.inputFirsts {
		d, err := e.firstInput(ctx, fmt.Sprintf("%s-first-%d", runID, i))
		if err != nil {
			return fail(err)
		}
		firsts = append(firsts, d)
	}
	e.logf("%s: first input of %d runs, sent on started → read by the agent: %v", row, len(firsts), firsts)
	var (
		mu      sync.Mutex
		lat     []time.Duration
		seen    uint64
		bad     error
		started = make(chan struct{})
		once    sync.Once
		warm    = make(chan struct{})
		warmLat time.Duration
	)
	term := newTerminal()
	sub, err := e.subscribe(e.names.RunFilter(runID), func(m runMsg) {
		term.see(m)
		if m.status != nil && m.status.Status == protocol.StatusStarted {
			once.Do(func() { close(started) })
		}
		if m.kind != protocol.KindEvents {
			return
		}
		var l echoLine
		mu.Lock()
		defer mu.Unlock()
		switch {
		case json.Unmarshal(m.data, &l) != nil || l.Type != "bench-input":
			bad = fmt.Errorf("line %.60q is not the echo agent's", m.data)
		case l.Seq == 0 && seen == 0:
			warmLat = time.Duration(l.Read - l.Sent)
			close(warm) // the warm-up message
			return
		case l.Seq != seen+1:
			bad = fmt.Errorf("input %d after input %d", l.Seq, seen)
		default:
			lat = append(lat, time.Duration(l.Read-l.Sent))
		}
		seen = l.Seq
	})
	if err != nil {
		return fail(err)
	}
	defer sub.Unsubscribe()
	if err := e.client.Submit(ctx, protocol.Job{RunID: runID, Profile: "echo"}); err != nil {
		return fail(err)
	}
	select {
	case <-started:
	case <-ctx.Done():
		return fail(ctx.Err())
	case <-time.After(time.Minute):
		return fail(fmt.Errorf("run %s not started within a minute", runID))
	}
	// A warm-up message first, sent on started: it is this run's first
	// input, counted with the short runs' and left out of the steady
	// state.
	warmAt := time.Now()
	if _, err := e.client.Send(ctx, runID, fmt.Appendf(nil, "0 %d", warmAt.UnixNano())); err != nil {
		return fail(fmt.Errorf("send the warm-up message: %w", err))
	}
	select {
	case <-warm:
		mu.Lock()
		firsts = append(firsts, warmLat)
		mu.Unlock()
		e.logf("%s: the warm-up message reached the agent in %s", row, time.Since(warmAt))
	case <-ctx.Done():
		return fail(ctx.Err())
	case <-time.After(time.Minute):
		return fail(errors.New("the warm-up message got no answer within a minute"))
	}
	// An absolute schedule: a slow send does not shift the rest.
	var stored []time.Duration // send → the worker's reply (the message stored)
	begin := time.Now()
	for i := 1; i <= sz.inputMsgs; i++ {
		if d := time.Until(begin.Add(time.Duration(float64(i-1) / inputRate * float64(time.Second)))); d > 0 {
			time.Sleep(d)
		}
		at := time.Now()
		data := fmt.Appendf(nil, "%d %d", i, at.UnixNano())
		if _, err := e.client.Send(ctx, runID, data); err != nil {
			return fail(fmt.Errorf("send %d: %w", i, err))
		}
		stored = append(stored, time.Since(at))
	}
	if _, err := e.client.Send(ctx, runID, nil, client.WithEOF()); err != nil {
		return fail(fmt.Errorf("send end of input: %w", err))
	}
	statuses, err := e.waitRuns(ctx, term, []string{runID}, time.Minute)
	if err != nil {
		mu.Lock()
		n := seen
		mu.Unlock()
		return fail(fmt.Errorf("run %s not ended a minute after its last input (%w): the agent had answered %d of %d messages; first inputs %v",
			runID, err, n, sz.inputMsgs, firsts))
	}
	if st := statuses[runID]; st.Status != protocol.StatusSucceeded {
		return fail(fmt.Errorf("run ended %s: %s", st.Status, st.Reason))
	}
	mu.Lock()
	defer mu.Unlock()
	if bad != nil {
		return fail(bad)
	}
	if int(seen) != sz.inputMsgs {
		return fail(fmt.Errorf("the agent answered %d of %d messages", seen, sz.inputMsgs))
	}
	over := slowest(lat, 5*time.Millisecond) // before quantile sorts lat
	p50, p99, top := quantile(lat, 0.5), quantile(lat, 0.99), quantile(lat, 1)
	fp50, fmax := quantile(firsts, 0.5), quantile(firsts, 1)
	e.logf("%s: %d messages: p50 %s p99 %s max %s; over 5 ms: %v", row, len(lat), p50, p99, top, over)
	e.logf("%s: of which send → stored (the worker's reply): p50 %s p99 %s max %s", row, quantile(stored, 0.5), quantile(stored, 0.99), quantile(stored, 1))
	return []Result{{
		Row:    row,
		Target: target,
		Measured: fmt.Sprintf("p50 %s, p99 %s, max %s (%d messages at %.0f/s, send→agent's stdin, each once in order); first input p50 %s, max %s (%d runs)",
			ms(p50), ms(p99), ms(top), len(lat), inputRate, ms(fp50), ms(fmax), len(firsts)),
		Pass: verdict(p99 <= 5*time.Millisecond && fmax <= firstInputTarget),
	}}
}

// firstInput starts a run of the echo agent, sends it one message the
// moment its started status arrives, and returns the time from the send
// to the agent's read; then it closes the run's stdin and waits for its
// end.
func (e *env) firstInput(ctx context.Context, runID string) (time.Duration, error) {
	var (
		started = make(chan struct{})
		once    sync.Once
		got     = make(chan echoLine, 1)
	)
	term := newTerminal()
	sub, err := e.subscribe(e.names.RunFilter(runID), func(m runMsg) {
		term.see(m)
		if m.status != nil && m.status.Status == protocol.StatusStarted {
			once.Do(func() { close(started) })
		}
		var l echoLine
		if m.kind == protocol.KindEvents && json.Unmarshal(m.data, &l) == nil && l.Type == "bench-input" {
			select {
			case got <- l:
			default:
			}
		}
	})
	if err != nil {
		return 0, err
	}
	defer sub.Unsubscribe()
	if err := e.client.Submit(ctx, protocol.Job{RunID: runID, Profile: "echo"}); err != nil {
		return 0, err
	}
	select {
	case <-started:
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(time.Minute):
		return 0, fmt.Errorf("run %s not started within a minute", runID)
	}
	if _, err := e.client.Send(ctx, runID, fmt.Appendf(nil, "1 %d", time.Now().UnixNano()), client.WithEOF()); err != nil {
		return 0, fmt.Errorf("run %s: send its first input: %w", runID, err)
	}
	var l echoLine
	select {
	case l = <-got:
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(time.Minute):
		return 0, fmt.Errorf("run %s: its first input got no answer within a minute", runID)
	}
	statuses, err := e.waitRuns(ctx, term, []string{runID}, time.Minute)
	if err != nil {
		return 0, err
	}
	if st := statuses[runID]; st.Status != protocol.StatusSucceeded {
		return 0, fmt.Errorf("run %s ended %s: %s", runID, st.Status, st.Reason)
	}
	return time.Duration(l.Read - l.Sent), nil
}

// inputRate is the input row's messages per second.
const inputRate = 100.0

// slowest lists the 1-based numbers of the messages slower than d.
func slowest(lat []time.Duration, d time.Duration) []int {
	var out []int
	for i, l := range lat {
		if l > d {
			out = append(out, i+1)
		}
	}
	return out
}
