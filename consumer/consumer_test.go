package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/consumer"
	"github.com/batonhq/baton/internal/provision"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
)

// TestOneJobPerFreeSlot: with two slots and six jobs, exactly two jobs are
// delivered (and so have their AckWait running) until a slot frees; attach
// jobs are taken even while every slot is busy.
func TestOneJobPerFreeSlot(t *testing.T) {
	s := testenv.RunServer(t)
	nc, js := testenv.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names := protocol.MustNames("")
	if _, err := provision.Ensure(ctx, js, names, provision.Options{}); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		msg := nats.NewMsg(names.RunJobSubject())
		msg.Data = fmt.Appendf(nil, `{"runId":"r%d","profile":"demo"}`, i)
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	release := make(chan struct{})
	var started, attached atomic.Int32
	in := consumer.New(js, names, config.Default(), consumer.WithSelf("/bin/true"), consumer.WithFetchWait(200*time.Millisecond))
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = in.Run(runCtx, 2, "n1", consumer.Handlers{
			Run: func(ctx context.Context, j consumer.Job) {
				started.Add(1)
				<-release
				_ = j.Msg.Ack()
			},
			Attach: func(ctx context.Context, msg jetstream.Msg) {
				attached.Add(1)
				_ = msg.Ack()
			},
		})
	})
	// Wait, bounded, for the two slots' jobs to be delivered and started
	// (the consumer is created and the jobs fetched after Run begins; a
	// loaded machine takes its time); a third delivery fails at once.
	state := func() (int32, *jetstream.ConsumerInfo) {
		t.Helper()
		n := started.Load()
		c, err := js.Consumer(ctx, names.JobsStream(), consumer.DurableName)
		if err != nil {
			return n, nil
		}
		info, err := c.Info(ctx)
		if err != nil {
			return n, nil
		}
		if n > 2 || info.NumAckPending > 2 {
			t.Fatalf("started %d, ack pending %d with two slots busy; want at most 2 each", n, info.NumAckPending)
		}
		return n, info
	}
	testenv.WaitFor(t, 20*time.Second, "two jobs started, 2 ack pending and 4 pending", func() bool {
		n, info := state()
		return n == 2 && info != nil && info.NumAckPending == 2 && info.NumPending == 4
	})
	// No third is delivered while both slots stay busy: several fetches.
	time.Sleep(time.Second)
	if n, info := state(); n != 2 || info == nil || info.NumAckPending != 2 || info.NumPending != 4 {
		t.Fatalf("started %d, consumer %+v; want 2 started, 2 ack pending, 4 pending", n, info)
	}
	// Slots are full; an attach job is still taken.
	_ = nc.Publish(names.AttachJobSubject("n1"), []byte(`{"runId":"r0","reason":"handoff"}`))
	deadline := time.Now().Add(5 * time.Second)
	for attached.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if attached.Load() != 1 {
		t.Fatal("attach job not taken while slots were full")
	}
	close(release)
	for started.Load() < 6 && time.Now().Before(deadline.Add(10*time.Second)) {
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	wg.Wait()
	if started.Load() != 6 {
		t.Fatalf("%d jobs started", started.Load())
	}
}

// TestReservedLabels: a job setting a baton.* label is moved to the DLQ
// with the reason; the same job on the retry subject, where only workers
// publish, runs with its labels.
func TestReservedLabels(t *testing.T) {
	s := testenv.RunServer(t)
	_, js := testenv.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names := protocol.MustNames("")
	res, err := provision.Ensure(ctx, js, names, provision.Options{})
	if err != nil {
		t.Fatal(err)
	}
	job := []byte(`{"runId":"r-a2","profile":"demo","labels":{"baton.attempt":"2","baton.retryOf":"r"}}`)
	for _, subj := range []string{names.RunJobSubject(), names.RetryJobSubject()} {
		if _, err := js.Publish(ctx, subj, job); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var got []consumer.Job
	in := consumer.New(js, names, config.Default(), consumer.WithSelf("/bin/true"), consumer.WithFetchWait(200*time.Millisecond))
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = in.Run(runCtx, 2, "n1", consumer.Handlers{
			Run: func(ctx context.Context, j consumer.Job) {
				mu.Lock()
				got = append(got, j)
				mu.Unlock()
				_ = j.Msg.Ack()
			},
			Attach: func(ctx context.Context, msg jetstream.Msg) { _ = msg.Ack() },
		})
	})
	defer wg.Wait()
	defer stop()
	testenv.WaitFor(t, 10*time.Second, "the DLQ entry", func() bool {
		info, err := res.DLQ.Info(ctx)
		return err == nil && info.State.Msgs == 1
	})
	m, err := res.DLQ.GetLastMsgForSubject(ctx, names.DLQSubject(protocol.ReasonInvalid))
	if err != nil {
		t.Fatal(err)
	}
	if e := m.Header.Get(protocol.HeaderError); !strings.Contains(e, `"baton." is reserved`) || m.Header.Get(protocol.HeaderOrigSubject) != names.RunJobSubject() {
		t.Fatalf("DLQ entry: error %q, subject %q", e, m.Header.Get(protocol.HeaderOrigSubject))
	}
	if id := m.Header.Get(protocol.HeaderRunID); id != "r-a2" {
		t.Fatalf("DLQ entry names run %q, want r-a2", id)
	}
	testenv.WaitFor(t, 10*time.Second, "the retry to run", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 1
	})
	if l := got[0].Job.Labels; l[protocol.LabelAttempt] != "2" || got[0].Msg.Subject() != names.RetryJobSubject() {
		t.Fatalf("ran %s with labels %v", got[0].Msg.Subject(), l)
	}
}

// TestCannotConsume: with another consumer holding the jobs' subjects (a
// WorkQueue stream allows one per subject), Run fails at once with
// ErrCannotConsume; a consumer deleted under a running Intake is created
// again, and if that fails too, Run cancels its dispatches and fails.
func TestCannotConsume(t *testing.T) {
	s := testenv.RunServer(t)
	_, js := testenv.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	names := protocol.MustNames("")
	if _, err := provision.Ensure(ctx, js, names, provision.Options{}); err != nil {
		t.Fatal(err)
	}
	thief := jetstream.ConsumerConfig{Durable: "thief", FilterSubject: names.RunJobSubject(), AckPolicy: jetstream.AckExplicitPolicy}
	in := consumer.New(js, names, config.Default(), consumer.WithSelf("/bin/true"), consumer.WithFetchWait(200*time.Millisecond))

	t.Run("conflict at start", func(t *testing.T) {
		if _, err := js.CreateConsumer(ctx, names.JobsStream(), thief); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = js.DeleteConsumer(ctx, names.JobsStream(), thief.Durable) }()
		err := in.Run(ctx, 1, "n1", consumer.Handlers{})
		if !errors.Is(err, consumer.ErrCannotConsume) || !strings.Contains(err.Error(), "10100") {
			t.Fatalf("Run = %v, want ErrCannotConsume with err 10100", err)
		}
	})

	var started atomic.Int32
	var dispatchEnded atomic.Bool
	done := make(chan error, 1)
	go func() {
		done <- in.Run(ctx, 2, "n1", consumer.Handlers{
			Run: func(ctx context.Context, j consumer.Job) {
				started.Add(1)
				_ = j.Msg.Ack()
				if j.Job.RunID == "hold" {
					<-ctx.Done() // as a run does until its worker stops
					dispatchEnded.Store(true)
				}
			},
			Attach: func(ctx context.Context, msg jetstream.Msg) { _ = msg.Ack() },
		})
	}()
	publish := func(id string) {
		t.Helper()
		if _, err := js.Publish(ctx, names.RunJobSubject(), fmt.Appendf(nil, `{"runId":%q,"profile":"demo"}`, id)); err != nil {
			t.Fatal(err)
		}
	}
	publish("hold")
	testenv.WaitFor(t, 10*time.Second, "the first job", func() bool { return started.Load() == 1 })

	t.Run("deleted and created again", func(t *testing.T) {
		if err := js.DeleteConsumer(ctx, names.JobsStream(), consumer.DurableName); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, 10*time.Second, "the consumer to be created again", func() bool {
			_, err := js.Consumer(ctx, names.JobsStream(), consumer.DurableName)
			return err == nil
		})
		publish("after")
		testenv.WaitFor(t, 10*time.Second, "a job after the consumer came back", func() bool { return started.Load() == 2 })
	})

	t.Run("deleted and taken", func(t *testing.T) {
		// The Intake may recreate its consumer between the two calls:
		// then delete it again.
		testenv.WaitFor(t, 10*time.Second, "another consumer to take the jobs", func() bool {
			_ = js.DeleteConsumer(ctx, names.JobsStream(), consumer.DurableName)
			_, err := js.CreateConsumer(ctx, names.JobsStream(), thief)
			return err == nil
		})
		select {
		case err := <-done:
			if !errors.Is(err, consumer.ErrCannotConsume) || !strings.Contains(err.Error(), "10100") {
				t.Fatalf("Run = %v, want ErrCannotConsume with err 10100", err)
			}
			if !dispatchEnded.Load() {
				t.Fatal("Run returned before its dispatch ended")
			}
		case <-time.After(15 * time.Second):
			t.Fatal("Run still going 15s after its consumer was taken")
		}
	})
}

// TestProfileMaxConcurrent: with four slots, a profile capped at one runs
// one job at a time; its other jobs wait in the stream (not the DLQ) while
// another profile's job runs beside it, and all of them run in the end.
func TestProfileMaxConcurrent(t *testing.T) {
	s := testenv.RunServer(t)
	_, js := testenv.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	names := protocol.MustNames("")
	res, err := provision.Ensure(ctx, js, names, provision.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Profiles["one"] = config.Profile{Command: []string{"/bin/true"}, MaxConcurrent: 1}
	for i, p := range []string{"one", "one", "one", "demo"} {
		if _, err := js.Publish(ctx, names.RunJobSubject(), fmt.Appendf(nil, `{"runId":"r%d","profile":%q}`, i, p)); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	running, most, done := map[string]int{}, 0, 0
	release := make(chan struct{})
	in := consumer.New(js, names, cfg, consumer.WithSelf("/bin/true"),
		consumer.WithFetchWait(200*time.Millisecond), consumer.WithProfileWait(100*time.Millisecond))
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = in.Run(runCtx, 4, "n1", consumer.Handlers{
			Run: func(ctx context.Context, j consumer.Job) {
				mu.Lock()
				running[j.Invocation.Profile]++
				most = max(most, running["one"])
				mu.Unlock()
				<-release
				mu.Lock()
				running[j.Invocation.Profile]--
				done++
				mu.Unlock()
				_ = j.Msg.Ack()
			},
			Attach: func(ctx context.Context, msg jetstream.Msg) { _ = msg.Ack() },
		})
	})
	defer wg.Wait()
	defer stop()
	testenv.WaitFor(t, 10*time.Second, "one job of each profile to run", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return running["one"] == 1 && running["demo"] == 1
	})
	time.Sleep(time.Second) // several redeliveries of the waiting jobs
	mu.Lock()
	n := running["one"]
	mu.Unlock()
	if n != 1 {
		t.Fatalf("%d jobs of the capped profile run at once", n)
	}
	if info, err := res.DLQ.Info(ctx); err != nil || info.State.Msgs != 0 {
		t.Fatalf("DLQ: %+v, %v; waiting jobs must stay in the stream", info, err)
	}
	close(release)
	testenv.WaitFor(t, 20*time.Second, "every job to run", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return done == 4
	})
	if most != 1 {
		t.Fatalf("up to %d jobs of the capped profile ran at once", most)
	}
}

// TestStoppedIntakeLeavesJobsToOthers: a worker that stops while its pull
// request waits at the server (first in the queue) must not take the next
// job into it: the attach jobs a stopping worker publishes for the runs it
// hands off would otherwise sit there until AckWait. The other worker's
// intake gets it at once.
func TestStoppedIntakeLeavesJobsToOthers(t *testing.T) {
	s := testenv.RunServer(t)
	_, js := testenv.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	names := protocol.MustNames("")
	if _, err := provision.Ensure(ctx, js, names, provision.Options{}); err != nil {
		t.Fatal(err)
	}
	start := func(name string, got chan<- string) (stop func()) {
		// A long fetch keeps the first intake's request first in the queue.
		in := consumer.New(js, names, config.Default(), consumer.WithSelf("/bin/true"),
			consumer.WithFetchWait(20*time.Second), consumer.WithAckWait(30*time.Second))
		return startIntake(t, ctx, in, name, 1, consumer.Handlers{
			Run: func(ctx context.Context, j consumer.Job) { _ = j.Msg.Ack() },
			Attach: func(ctx context.Context, msg jetstream.Msg) {
				_ = msg.Ack()
				got <- name
			},
		})
	}
	got := make(chan string, 4)
	stopA := start("A", got)
	attachWaiting(t, ctx, js, names, 1)
	stopB := start("B", got)
	defer stopB()
	attachWaiting(t, ctx, js, names, 2)
	stopA()
	for i := range 3 {
		msg := nats.NewMsg(names.AttachJobSubject("n1"))
		msg.Data = fmt.Appendf(nil, `{"runId":"r%d","reason":"handoff"}`, i)
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
		select {
		case who := <-got:
			if who != "B" {
				t.Fatalf("attach job %d taken by the stopped intake %s", i, who)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("attach job %d not taken within 3s: it went to the stopped intake's pull request", i)
		}
	}
}

// TestHandoffAttachJobsGoToOthers: the runs a stopping intake holds see
// their context end only once its pull requests are gone, so the attach
// jobs they publish as they hand off (as the worker's runs do) go to the
// other worker's request, never to the stopped intake's one, which waits
// first in the queue and where they would sit until AckWait.
func TestHandoffAttachJobsGoToOthers(t *testing.T) {
	s := testenv.RunServer(t)
	_, js := testenv.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	names := protocol.MustNames("")
	if _, err := provision.Ensure(ctx, js, names, provision.Options{}); err != nil {
		t.Fatal(err)
	}
	const runs = 8
	held := make(chan string, runs)
	attached := make(chan string, runs)
	start := func(name string, slots int) (stop func()) {
		in := consumer.New(js, names, config.Default(), consumer.WithSelf("/bin/true"),
			consumer.WithFetchWait(20*time.Second), consumer.WithAckWait(30*time.Second))
		return startIntake(t, ctx, in, name, slots, consumer.Handlers{
			Run: func(ctx context.Context, j consumer.Job) {
				_ = j.Msg.Ack()
				held <- j.Job.RunID
				<-ctx.Done() // the worker stops: hand the run off
				msg := nats.NewMsg(names.AttachJobSubject("n1"))
				msg.Data = fmt.Appendf(nil, `{"runId":%q,"reason":"handoff"}`, j.Job.RunID)
				pctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if _, err := js.PublishMsg(pctx, msg); err != nil {
					t.Errorf("hand off %s: %v", j.Job.RunID, err)
				}
			},
			Attach: func(ctx context.Context, msg jetstream.Msg) {
				_ = msg.Ack()
				attached <- name
			},
		})
	}
	stopA := start("A", runs)
	for i := range runs {
		job := fmt.Appendf(nil, `{"runId":"r%d","profile":"demo"}`, i)
		if _, err := js.Publish(ctx, names.RunJobSubject(), job); err != nil {
			t.Fatal(err)
		}
		select {
		case <-held:
		case <-time.After(10 * time.Second):
			t.Fatalf("intake A did not take run job %d within 10s", i)
		}
	}
	attachWaiting(t, ctx, js, names, 1)
	stopB := start("B", 1)
	defer stopB()
	attachWaiting(t, ctx, js, names, 2)
	stopA()
	for i := range runs {
		select {
		case who := <-attached:
			if who != "B" {
				t.Fatalf("attach job %d taken by the stopped intake %s", i, who)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("attach job %d of %d not taken within 3s: it went to the stopped intake's pull request", i+1, runs)
		}
	}
}

// TestReconnectedIntakeAsksAgain: an idle intake's pull requests wait
// idleFetchWait (30 s) at the server; a server that dies (no "409 Server
// Shutdown" reaches the client: its link is cut first) and restarts has
// lost them, so the intake asks again as soon as it is reconnected, and
// the jobs published then are taken at once, not when the lost requests
// would have expired.
func TestReconnectedIntakeAsksAgain(t *testing.T) {
	dir := t.TempDir()
	s := testenv.RunServerIn(t, dir, -1)
	port := s.Addr().(*net.TCPAddr).Port
	link := newLink(t, fmt.Sprintf("127.0.0.1:%d", port))
	nc, err := nats.Connect("nats://"+link.addr(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	names := protocol.MustNames("")
	if _, err := provision.Ensure(ctx, js, names, provision.Options{}); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 2)
	in := consumer.New(js, names, config.Default(), consumer.WithSelf("/bin/true"), consumer.WithAckWait(30*time.Second))
	stop := startIntake(t, ctx, in, "A", 1, consumer.Handlers{
		Run: func(ctx context.Context, j consumer.Job) {
			_ = j.Msg.Ack()
			got <- "run " + j.Job.RunID
		},
		Attach: func(ctx context.Context, msg jetstream.Msg) {
			_ = msg.Ack()
			got <- "attach"
		},
	})
	defer stop()
	attachWaiting(t, ctx, js, names, 1)

	link.cut(true)
	testenv.WaitFor(t, 10*time.Second, "the client to see the server gone", func() bool { return nc.Status() == nats.RECONNECTING })
	s.Shutdown()
	s.WaitForShutdown()
	testenv.RunServerIn(t, dir, port)
	link.cut(false)
	testenv.WaitFor(t, 10*time.Second, "the client to reconnect", func() bool { return nc.Status() == nats.CONNECTED })

	published := time.Now()
	run := nats.NewMsg(names.RunJobSubject())
	run.Data = []byte(`{"runId":"r1","profile":"demo"}`)
	attach := nats.NewMsg(names.AttachJobSubject("n1"))
	attach.Data = []byte(`{"runId":"r0","reason":"handoff"}`)
	for _, m := range []*nats.Msg{run, attach} {
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]bool{"run r1": true, "attach": true}
	for len(want) > 0 {
		select {
		case what := <-got:
			delete(want, what)
		case <-time.After(10 * time.Second):
			t.Fatalf("jobs %v not taken 10s after the server's restart (the pull requests lost with it wait 30s)", want)
		}
	}
	t.Logf("both jobs taken %v after their publish", time.Since(published).Round(time.Millisecond))
}

// link is a TCP relay to a server that can be cut: its connections are
// closed and new ones refused, as a server's crash or a network's loss
// looks to a client.
type link struct {
	ln     net.Listener
	mu     sync.Mutex
	down   bool
	conns  []net.Conn
	target string
}

func newLink(t *testing.T, target string) *link {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &link{ln: ln, target: target}
	t.Cleanup(func() { _ = ln.Close(); l.cut(true) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.mu.Lock()
			down := l.down
			l.mu.Unlock()
			up, err := net.Dial("tcp", target)
			if down || err != nil {
				_ = c.Close()
				if up != nil {
					_ = up.Close()
				}
				continue
			}
			l.mu.Lock()
			l.conns = append(l.conns, c, up)
			l.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
			go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
		}
	}()
	return l
}

func (l *link) addr() string { return l.ln.Addr().String() }

// cut closes every relayed connection and refuses new ones while down.
func (l *link) cut(down bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.down = down
	if down {
		for _, c := range l.conns {
			_ = c.Close()
		}
		l.conns = nil
	}
}

func attachWaiting(t *testing.T, ctx context.Context, js jetstream.JetStream, names protocol.Names, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := js.Consumer(ctx, names.JobsStream(), consumer.AttachDurableName("n1"))
		if err == nil {
			if info, ierr := c.Info(ctx); ierr == nil && info.NumWaiting == n {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the attach consumer never had %d pull requests waiting (last error %v)", n, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startIntake runs in on node n1 until the returned stop, which fails the
// test if Run has not returned 5 s after its context ended.
func startIntake(t *testing.T, ctx context.Context, in *consumer.Intake, name string, slots int, h consumer.Handlers) (stop func()) {
	runCtx, stopRun := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = in.Run(runCtx, slots, "n1", h)
	}()
	return func() {
		stopRun()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("intake %s still running 5s after its context ended", name)
		}
	}
}
