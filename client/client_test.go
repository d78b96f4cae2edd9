package client_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/provision"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/worker"
)

var names = protocol.MustNames("baton")

type env struct {
	js  jetstream.JetStream
	res *provision.Resources
	c   *client.Client
	// stopRelay stops the read relay setup started (startRelay starts one
	// again).
	stopRelay func()
}

func setup(t *testing.T, opts ...client.Option) env {
	t.Helper()
	s := testenv.RunServer(t)
	_, js := testenv.Connect(t, s)
	res, err := provision.Ensure(ctxT(t), js, names, provision.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(js, names, opts...)
	if err != nil {
		t.Fatal(err)
	}
	e := env{js: js, res: res, c: c}
	// The client reads through the workers' read relay.
	e.startRelay(t)
	return e
}

// startRelay serves the read relay until the test ends or stopRelay.
func (e *env) startRelay(t *testing.T) {
	t.Helper()
	stop, err := worker.ServeReadRelay(t.Context(), e.js.Conn(), names, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	e.stopRelay = func() { _ = stop() }
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestSubmit(t *testing.T) {
	e := setup(t)
	ctx := ctxT(t)
	job := protocol.Job{
		RunID: "run-1", Profile: "demo", Input: "say <hi> & bye",
		Env: map[string]string{"MODE": "fast"}, Timeout: protocol.Duration(90 * time.Second),
		Files: map[string]string{"notes/a.txt": "hello\n"}, Labels: map[string]string{"pr": "7"},
	}
	if err := e.c.Submit(ctx, job); err != nil {
		t.Fatalf("Submit: %v", err)
	}
	err := e.c.Submit(ctx, job)
	if !errors.Is(err, client.ErrDuplicate) {
		t.Fatalf("second Submit: got %v, want ErrDuplicate", err)
	}

	info, err := e.res.Jobs.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("jobs stream holds %d messages, want 1 (the duplicate must not be stored)", info.State.Msgs)
	}
	msg, err := e.res.Jobs.GetMsg(ctx, info.State.LastSeq)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Subject != names.RunJobSubject() {
		t.Errorf("subject %q, want %q", msg.Subject, names.RunJobSubject())
	}
	if got := msg.Header.Get(protocol.HeaderMsgID); got != "run-1" {
		t.Errorf("Nats-Msg-Id %q, want run-1", got)
	}
	got, err := protocol.DecodeJob(msg.Data, msg.Header.Get(protocol.HeaderContentType), protocol.Limits{})
	if err != nil {
		t.Fatalf("the worker's decoder rejects the submitted job: %v\n%s", err, msg.Data)
	}
	if got.RunID != job.RunID || got.Input != job.Input || got.Env["MODE"] != "fast" ||
		got.Files["notes/a.txt"] != "hello\n" || got.Labels["pr"] != "7" || got.Timeout != job.Timeout {
		t.Errorf("decoded job %+v, want %+v", got, job)
	}
}

func TestSubmitRejectsBadJobsLocally(t *testing.T) {
	e := setup(t)
	ctx := ctxT(t)
	for _, tc := range []struct {
		job  protocol.Job
		want error
	}{
		{protocol.Job{RunID: "a.b", Profile: "demo"}, protocol.ErrBadRunID},
		{protocol.Job{RunID: "", Profile: "demo"}, protocol.ErrBadRunID},
		{protocol.Job{RunID: "ok", Profile: ""}, protocol.ErrInvalidJob},
		{protocol.Job{RunID: "ok", Profile: "demo", Files: map[string]string{"../x": ""}}, protocol.ErrInvalidJob},
	} {
		if err := e.c.Submit(ctx, tc.job); !errors.Is(err, tc.want) {
			t.Errorf("Submit(%+v): got %v, want %v", tc.job, err, tc.want)
		}
	}
	info, err := e.res.Jobs.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 0 {
		t.Fatalf("jobs stream holds %d messages; rejected jobs must not be sent", info.State.Msgs)
	}
}

func TestSubmitWithoutStreamSaysSo(t *testing.T) {
	s := testenv.RunServer(t)
	_, js := testenv.Connect(t, s)
	c, err := client.New(js, names)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Submit(ctxT(t), protocol.Job{RunID: "r", Profile: "demo"})
	if err == nil || !strings.Contains(err.Error(), "provisioned") {
		t.Fatalf("Submit with no jobs stream: got %v, want an error saying the stream is not provisioned", err)
	}
}

// chainMsg is one message a worker would put on a run's chain.
type chainMsg struct {
	kind   protocol.RunKind
	data   string
	offset int64
	chunk  string // Baton-Chunk, if any
}

// publish puts m on run's chain with the headers a worker sets, and returns
// its stream sequence.
func publish(t *testing.T, js jetstream.JetStream, run string, m chainMsg) uint64 {
	t.Helper()
	kind := protocol.KindEvents
	if m.kind == protocol.KindRaw || m.kind == protocol.KindStatus {
		kind = m.kind
	}
	msg := nats.NewMsg(names.IngestSubject(run, kind))
	msg.Data = []byte(m.data)
	msg.Header.Set(protocol.HeaderOffset, fmt.Sprint(m.offset))
	id := fmt.Sprintf("%s:%d", run, m.offset)
	if m.chunk != "" {
		msg.Header.Set(protocol.HeaderChunk, m.chunk)
		id += ":" + m.chunk[:strings.IndexByte(m.chunk, '/')]
	}
	if m.kind == protocol.KindStatus {
		id = fmt.Sprintf("%s:status:%d", run, m.offset)
	}
	msg.Header.Set(protocol.HeaderMsgID, id)
	ack, err := js.PublishMsg(context.Background(), msg)
	if err != nil {
		t.Errorf("publish %+v: %v", m, err)
		return 0
	}
	return ack.Sequence
}

func status(run string, st protocol.StatusType, off int64) string {
	s := protocol.Status{Status: st, RunID: run, Worker: "w1", Node: "n1", Epoch: 3, Offset: off}
	if st.Terminal() {
		code := 0
		s.ExitCode = &code
	}
	return string(s.Marshal())
}

// watched is what the test's fn saw of one event.
type watched struct {
	kind   protocol.RunKind
	data   string
	offset int64
	seq    uint64
	status protocol.StatusType
}

func collect(got *[]watched, seen chan<- struct{}) func(client.Event) error {
	return func(ev client.Event) error {
		w := watched{kind: ev.Kind, data: string(ev.Data), offset: ev.Offset, seq: ev.Seq}
		if ev.Status != nil {
			w.status = ev.Status.Status
		}
		*got = append(*got, w)
		if seen != nil {
			seen <- struct{}{}
		}
		return nil
	}
}

func TestWatchReplaysThenFollows(t *testing.T) {
	e := setup(t)
	ctx := ctxT(t)
	const run = "r1"
	big := strings.Repeat("x", 300)
	bigLine := `{"type":"big","s":"` + big + `"}`

	// Already on the chain before the watch starts: replayed.
	var want []watched
	add := func(m chainMsg, w watched) {
		w.seq = publish(t, e.js, run, m)
		want = append(want, w)
	}
	add(chainMsg{kind: protocol.KindStatus, data: status(run, protocol.StatusStarted, 0)},
		watched{kind: protocol.KindStatus, data: status(run, protocol.StatusStarted, 0), status: protocol.StatusStarted})
	add(chainMsg{kind: protocol.KindEvents, data: `{"type":"a"}`, offset: 13}, watched{kind: protocol.KindEvents, data: `{"type":"a"}`, offset: 13})
	publish(t, e.js, "other", chainMsg{kind: protocol.KindEvents, data: `{"type":"not mine"}`, offset: 20})
	add(chainMsg{kind: protocol.KindRaw, data: "plain text", offset: 24}, watched{kind: protocol.KindRaw, data: "plain text", offset: 24})
	replayed := len(want)

	var got []watched
	seen := make(chan struct{}, 100)
	type result struct {
		st  protocol.Status
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, err := e.c.Watch(ctx, run, collect(&got, seen))
		done <- result{st, err}
	}()
	for range replayed {
		select {
		case <-seen:
		case <-ctx.Done():
			t.Fatal("the watcher did not replay the messages already on the chain")
		}
	}

	// Published while the watcher follows: a line in 3 chunks, interleaved
	// with another run's messages, then the terminal status.
	producerDone := make(chan []watched)
	go func() {
		var live []watched
		off := int64(24 + len(bigLine) + 1)
		var seq uint64
		for i, part := range []string{bigLine[:100], bigLine[100:200], bigLine[200:]} {
			seq = publish(t, e.js, run, chainMsg{kind: protocol.KindEvents, data: part, offset: off, chunk: fmt.Sprintf("%d/3", i+1)})
			publish(t, e.js, "other", chainMsg{kind: protocol.KindRaw, data: "noise", offset: int64(i)})
		}
		live = append(live, watched{kind: protocol.KindEvents, data: bigLine, offset: off, seq: seq})
		seq = publish(t, e.js, run, chainMsg{kind: protocol.KindStatus, data: status(run, protocol.StatusSucceeded, off), offset: off})
		live = append(live, watched{kind: protocol.KindStatus, data: status(run, protocol.StatusSucceeded, off), offset: off, seq: seq, status: protocol.StatusSucceeded})
		// Nothing follows a terminal status; a stray message must not be seen.
		publish(t, e.js, run, chainMsg{kind: protocol.KindEvents, data: `{"type":"after"}`, offset: off + 20})
		producerDone <- live
	}()
	want = append(want, <-producerDone...)

	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		t.Fatal("Watch did not return after the terminal status")
	}
	if r.err != nil {
		t.Fatalf("Watch: %v", r.err)
	}
	if r.st.Status != protocol.StatusSucceeded || r.st.RunID != run || r.st.ExitCode == nil || *r.st.ExitCode != 0 {
		t.Errorf("Watch returned status %+v, want succeeded with exit 0", r.st)
	}
	if !slices.Equal(got, want) {
		t.Errorf("events seen:\n%v\nwant:\n%v", got, want)
	}
}

func TestWatchFromSequence(t *testing.T) {
	e := setup(t)
	ctx := ctxT(t)
	const run = "r2"
	publish(t, e.js, run, chainMsg{kind: protocol.KindEvents, data: `{"n":1}`, offset: 8})
	s2 := publish(t, e.js, run, chainMsg{kind: protocol.KindEvents, data: `{"n":2}`, offset: 16})
	publish(t, e.js, run, chainMsg{kind: protocol.KindStatus, data: status(run, protocol.StatusFailed, 16), offset: 16})

	var got []watched
	st, err := e.c.Watch(ctx, run, collect(&got, nil), client.FromSequence(s2))
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != protocol.StatusFailed {
		t.Errorf("status %s, want failed", st.Status)
	}
	if len(got) != 2 || got[0].data != `{"n":2}` || got[1].status != protocol.StatusFailed {
		t.Errorf("resumed watch saw %v, want event 2 then the failed status", got)
	}
}

func TestWatchBrokenChunksFail(t *testing.T) {
	for _, tc := range []struct {
		name string
		msgs []chainMsg
	}{
		{"piece missing before another line", []chainMsg{
			{kind: protocol.KindEvents, data: "{", offset: 9, chunk: "1/3"},
			{kind: protocol.KindEvents, data: "}", offset: 9, chunk: "2/3"},
			{kind: protocol.KindEvents, data: `{"next":1}`, offset: 20},
		}},
		{"piece skipped", []chainMsg{
			{kind: protocol.KindEvents, data: "{", offset: 9, chunk: "1/3"},
			{kind: protocol.KindEvents, data: "}", offset: 9, chunk: "3/3"},
		}},
		{"first piece missing", []chainMsg{
			{kind: protocol.KindEvents, data: "}", offset: 9, chunk: "2/2"},
		}},
		{"status inside a chunked line", []chainMsg{
			{kind: protocol.KindEvents, data: "{", offset: 9, chunk: "1/2"},
			{kind: protocol.KindStatus, data: status("rb", protocol.StatusFailed, 9), offset: 9},
		}},
		{"malformed header", []chainMsg{
			{kind: protocol.KindEvents, data: "{}", offset: 9, chunk: "one/two"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t)
			for _, m := range tc.msgs {
				publish(t, e.js, "rb", m)
			}
			var got []watched
			_, err := e.c.Watch(ctxT(t), "rb", collect(&got, nil))
			if !errors.Is(err, client.ErrBrokenChunk) {
				t.Fatalf("Watch: got %v, want ErrBrokenChunk", err)
			}
			if len(got) != 0 {
				t.Errorf("pieces of a broken line reached fn: %v", got)
			}
		})
	}
}

func TestWatchLineLimit(t *testing.T) {
	e := setup(t, client.WithMaxLineBytes(10))
	publish(t, e.js, "rl", chainMsg{kind: protocol.KindEvents, data: "012345", offset: 13, chunk: "1/2"})
	publish(t, e.js, "rl", chainMsg{kind: protocol.KindEvents, data: "67890}", offset: 13, chunk: "2/2"})
	_, err := e.c.Watch(ctxT(t), "rl", func(client.Event) error { return nil })
	if !errors.Is(err, client.ErrBrokenChunk) || !strings.Contains(err.Error(), "larger than 10 bytes") {
		t.Fatalf("Watch: got %v, want ErrBrokenChunk for a line over the limit", err)
	}
}

func TestWatchStopsOnContextAndFnError(t *testing.T) {
	e := setup(t)
	const run = "r3"
	publish(t, e.js, run, chainMsg{kind: protocol.KindStatus, data: status(run, protocol.StatusStarted, 0)})

	ctx, cancel := context.WithCancel(ctxT(t))
	start := time.Now()
	_, err := e.c.Watch(ctx, run, func(ev client.Event) error {
		cancel() // nothing terminal follows: only ctx can end the watch
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch after cancel: got %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Watch took %s to notice the cancel", d)
	}

	stop := errors.New("enough")
	_, err = e.c.Watch(ctxT(t), run, func(client.Event) error { return stop })
	if !errors.Is(err, stop) {
		t.Fatalf("Watch with failing fn: got %v, want fn's error", err)
	}
}

func TestWatchBadStatusFails(t *testing.T) {
	e := setup(t)
	publish(t, e.js, "rs", chainMsg{kind: protocol.KindStatus, data: "not json", offset: 0})
	_, err := e.c.Watch(ctxT(t), "rs", func(client.Event) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "not a status") {
		t.Fatalf("Watch: got %v, want an error about the unreadable status", err)
	}
	if _, err := e.c.Watch(ctxT(t), "bad.id", func(client.Event) error { return nil }); !errors.Is(err, protocol.ErrBadRunID) {
		t.Fatalf("Watch(bad.id): got %v, want ErrBadRunID", err)
	}
}

func TestRunsRunCancel(t *testing.T) {
	e := setup(t)
	ctx := ctxT(t)
	runs := kv.NewStore[kv.RunRecord](e.res.Runs)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	code := 0
	for _, r := range []kv.RunRecord{
		{RunID: "old", State: kv.RunState(protocol.StatusSucceeded), Profile: "demo", CreatedAt: t0, ExitCode: &code},
		{RunID: "new", State: kv.RunRunning, Profile: "demo", Node: "n1", Worker: "w1", CreatedAt: t0.Add(2 * time.Minute)},
		{RunID: "mid", State: kv.RunStarting, Profile: "demo", CreatedAt: t0.Add(time.Minute)},
	} {
		if _, err := runs.Create(ctx, r.RunID, r); err != nil {
			t.Fatal(err)
		}
	}

	list, err := e.c.Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range list {
		ids = append(ids, r.RunID)
	}
	if !slices.Equal(ids, []string{"new", "mid", "old"}) {
		t.Errorf("Runs order %v, want newest first [new mid old]", ids)
	}

	rec, err := e.c.Run(ctx, "new")
	if err != nil || rec.Node != "n1" || rec.State != kv.RunRunning {
		t.Errorf("Run(new) = %+v, %v", rec, err)
	}
	if _, err := e.c.Run(ctx, "nope"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("Run(nope): got %v, want ErrNotFound", err)
	}

	// Cancel is a request the workers answer: with none, it says so.
	if _, err := e.c.Cancel(ctx, "new"); !errors.Is(err, client.ErrNoWorker) {
		t.Fatalf("Cancel with no worker: got %v, want ErrNoWorker", err)
	}
	startWorker(t, e.js)
	for range 2 { // cancelling twice is harmless
		rep, err := e.c.Cancel(ctx, "new")
		if err != nil || rep.RunID != "new" || rep.Worker != "w1" || rep.Node != "n1" || rep.State != string(kv.RunRunning) {
			t.Fatalf("Cancel(new) = %+v, %v", rep, err)
		}
	}
	stored, _, err := runs.Get(ctx, "new")
	if err != nil || !stored.CancelRequested || stored.Worker != "w1" {
		t.Errorf("stored record after Cancel: %+v, %v; want CancelRequested and the other fields kept", stored, err)
	}
	if _, err := e.c.Cancel(ctx, "old"); !errors.Is(err, client.ErrTerminal) {
		t.Errorf("Cancel(old): got %v, want ErrTerminal", err)
	}
	if stored, _, _ := runs.Get(ctx, "old"); stored.CancelRequested {
		t.Error("Cancel of an ended run changed its record")
	}
	if _, err := e.c.Cancel(ctx, "nope"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("Cancel(nope): got %v, want ErrNotFound", err)
	}

	// An unreadable record is reported, and the others still listed.
	if _, err := e.res.Runs.Put(ctx, "junk", []byte{0xc1}); err != nil {
		t.Fatal(err)
	}
	list, err = e.c.Runs(ctx)
	if !errors.Is(err, kv.ErrDecode) || len(list) != 3 {
		t.Errorf("Runs with a junk record: %d records, %v; want the 3 good ones and ErrDecode", len(list), err)
	}
}

func TestDLQ(t *testing.T) {
	e := setup(t)
	ctx := ctxT(t)
	if got, err := e.c.DLQ(ctx, 10); err != nil || len(got) != 0 {
		t.Fatalf("empty DLQ: %v, %v", got, err)
	}
	put := func(i int, withHeaders bool) uint64 {
		msg := nats.NewMsg(names.DLQSubject(protocol.ReasonUnknownProfile))
		msg.Data = []byte(fmt.Sprintf(`{"runId":"r%d","profile":"nope"}`, i))
		if withHeaders {
			msg.Header.Set(protocol.HeaderReason, string(protocol.ReasonUnknownProfile))
			msg.Header.Set(protocol.HeaderError, fmt.Sprintf("unknown profile %d", i))
			msg.Header.Set(protocol.HeaderOrigSubject, names.RunJobSubject())
			msg.Header.Set(protocol.HeaderOrigMsgID, fmt.Sprintf("r%d", i))
		}
		ack, err := e.js.PublishMsg(ctx, msg)
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	var seqs []uint64
	for i := 1; i <= 6; i++ {
		seqs = append(seqs, put(i, i != 6))
	}

	got, err := e.c.DLQ(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Seq != seqs[5] || got[1].Seq != seqs[4] {
		t.Fatalf("DLQ(2) = %+v, want the newest two, newest first", got)
	}
	if got[0].Reason != protocol.ReasonUnknownProfile || got[0].Error != "" {
		t.Errorf("entry without headers: %+v; want the reason taken from the subject", got[0])
	}
	g := got[1]
	if g.Reason != protocol.ReasonUnknownProfile || g.Error != "unknown profile 5" || g.Subject != names.RunJobSubject() ||
		g.MsgID != "r5" || string(g.Payload) != `{"runId":"r5","profile":"nope"}` || time.Since(g.Time) > time.Minute {
		t.Errorf("entry with headers: %+v", g)
	}

	// An interior delete must not shorten the answer.
	if err := e.res.DLQ.DeleteMsg(ctx, seqs[4]); err != nil {
		t.Fatal(err)
	}
	got, err = e.c.DLQ(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	var gotSeqs []uint64
	for _, d := range got {
		gotSeqs = append(gotSeqs, d.Seq)
	}
	if !slices.Equal(gotSeqs, []uint64{seqs[5], seqs[3], seqs[2]}) {
		t.Errorf("DLQ(3) after deleting seq %d: %v, want %v", seqs[4], gotSeqs, []uint64{seqs[5], seqs[3], seqs[2]})
	}
	all, err := e.c.DLQ(ctx, 0)
	if err != nil || len(all) != 5 {
		t.Errorf("DLQ(0) = %d entries, %v; want all 5", len(all), err)
	}
}

// A watch whose consumer is gone and cannot be made again (here: its
// stream was deleted) still ends when its context does. nats.go v1.55
// retries an ordered consumer's re-creation forever and does not look at
// the context of Next while it does.
func TestWatchEndsOnContextWhileItsConsumerCannotBeRemade(t *testing.T) {
	e := setup(t)
	const run = "r9"
	publish(t, e.js, run, chainMsg{kind: protocol.KindStatus, data: status(run, protocol.StatusStarted, 0)})

	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	first := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := e.c.Watch(ctx, run, func(client.Event) error {
			close(first)
			return nil
		})
		done <- err
	}()
	<-first
	if err := e.js.DeleteStream(ctxT(t), names.EventsStream()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the watch is re-creating its consumer by now
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Watch after cancel: got %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Watch still running 30s after its context ended, its consumer being re-created")
	}
}

// startWorker runs a real worker, which answers cancel requests, until the
// test ends.
func startWorker(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	w, err := worker.New(js.Conn(), config.Default(), worker.WithStateDir(t.TempDir()), worker.WithNode("cw"))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Serve(t, "worker", w.Ready(), 20*time.Second, w.Run)
}
