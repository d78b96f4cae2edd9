package test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/test/internal/e2e"
)

// The chaos suite's chain reader finishes a run whose consumer's server
// stops answering (frozen: no heartbeat, no error, no disconnect) while it
// reads. Its client is connected to a cluster member without JetStream, so
// the frozen server is never the client's and consumers are never placed
// on the client's server. Without heartbeats within each Next the reader
// waits on the frozen server until its deadline (the soak's stall of run
// chaos-12220-25: its consumer on a server holding 636 pending messages
// and no pull request).
func TestChainReaderSurvivesAFrozenServer(t *testing.T) {
	// Runs beside the package's other waiting tests, after its sequential
	// ones (the chaos suite among them): it waits on a frozen server's
	// consumer being replaced, bounded far above what it takes, and measures
	// nothing of the machine.
	t.Parallel()
	procs := startNATS(t, 3)
	i := slices.Index(procs[0].args, "--routes")
	relay := &natsProc{t: t, bin: procs[0].bin, name: "relay", port: testenv.FreePort(t), mport: testenv.FreePort(t), noJS: true,
		args: []string{"--cluster_name", "C", "--cluster", fmt.Sprintf("nats://127.0.0.1:%d", testenv.FreePort(t)), "--routes", procs[0].args[i+1]}}
	logf, err := os.Create(filepath.Join(t.TempDir(), "relay.log"))
	if err != nil {
		t.Fatal(err)
	}
	relay.log = logf
	relay.start()
	t.Cleanup(func() { relay.stop(syscall.SIGTERM); logf.Close() })
	nc, err := nats.Connect(relay.url(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	names := protocol.MustNames("")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for attempt := 1; ; attempt++ {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := js.CreateStream(cctx, jetstream.StreamConfig{Name: names.EventsStream(), Subjects: []string{names.RunsSubjects()}, Replicas: 3})
		ccancel()
		if err == nil {
			break
		}
		t.Logf("create the events stream, attempt %d: %v", attempt, err)
		if ctx.Err() != nil {
			t.Fatalf("create the events stream: %v; relay's log ends:\n%s", err, logTail(logf, 3000))
		}
		time.Sleep(200 * time.Millisecond)
	}
	const run = "frozen"
	n := 0
	publish := func(subject string, data []byte) {
		t.Helper()
		n++
		msg := nats.NewMsg(subject)
		msg.Data = data
		msg.Header.Set(nats.MsgIdHdr, fmt.Sprint(n))
		for {
			pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := js.PublishMsg(pctx, msg)
			pcancel()
			if err == nil {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("publish %d: %v", n, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	for range 10 {
		publish(names.EventsSubject(run), []byte(`{"line":1}`))
	}

	servers := make(chan string, 100)
	type result struct {
		msgs []jetstream.Msg
		err  error
	}
	done := make(chan result, 1)
	go func() {
		msgs, err := e2e.ReadChain(js, names, run, 60*time.Second, func(s string) { servers <- s })
		done <- result{msgs, err}
	}()
	var frozen *natsProc
	select {
	case s := <-servers:
		for _, p := range procs {
			if p.name == s {
				frozen = p
			}
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the reader placed no consumer within 20s")
	}
	if frozen == nil {
		t.Fatal("the reader's consumer is on no JetStream server of the cluster")
	}
	time.Sleep(time.Second) // it reads the first ten messages
	if err := frozen.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			_ = frozen.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	defer thaw()
	froze := time.Now()
	for range 5 {
		publish(names.EventsSubject(run), []byte(`{"line":2}`))
	}
	publish(names.StatusSubject(run), []byte(`{"status":"succeeded","runId":"frozen","exitCode":0}`))
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		if len(r.msgs) != n {
			t.Fatalf("read %d messages, want %d", len(r.msgs), n)
		}
		t.Logf("read the whole chain %v after %s froze", time.Since(froze).Round(time.Millisecond), frozen.name)
	case <-time.After(75 * time.Second):
		thaw()
		t.Fatalf("the reader did not finish within 75s of its consumer's server %s freezing", frozen.name)
	}
}
