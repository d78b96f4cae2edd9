package consumer_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/consumer"
	"github.com/batonhq/baton/internal/provision"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/worker"
)

// runIntake runs in until the test ends; its handlers must not be called.
func runIntake(t *testing.T, ctx context.Context, in *consumer.Intake) {
	t.Helper()
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = in.Run(runCtx, 1, "n1", consumer.Handlers{
			Run: func(ctx context.Context, j consumer.Job) {
				t.Errorf("job %s ran", j.Job.RunID)
				_ = j.Msg.Ack()
			},
			Attach: func(ctx context.Context, msg jetstream.Msg) { _ = msg.Ack() },
		})
	})
	t.Cleanup(func() { stop(); wg.Wait() })
}

// TestOversizeRejectionDeadLettered is F6's reproduction: a malformed job
// a hundred bytes under the server's max payload (and under
// maxJobBytes) does not fit the DLQ beside its headers. It must end in the
// DLQ as a truncated copy that says so, and leave the jobs stream empty,
// where it was once redelivered for ever.
func TestOversizeRejectionDeadLettered(t *testing.T) {
	s := testenv.RunServer(t)
	nc, js := testenv.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names := protocol.MustNames("")
	res, err := provision.Ensure(ctx, js, names, provision.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Malformed: an unterminated string, with a runId the log can name.
	job := append([]byte(`{"runId":"big-1","input":"`), bytes.Repeat([]byte("x"), int(nc.MaxPayload())-100)...)
	if _, err := js.Publish(ctx, names.RunJobSubject(), job); err != nil {
		t.Fatal(err)
	}
	in := consumer.New(js, names, config.Default(), consumer.WithSelf("/bin/true"),
		consumer.WithFetchWait(200*time.Millisecond), consumer.WithRejectWait(100*time.Millisecond))
	runIntake(t, ctx, in)
	testenv.WaitFor(t, 10*time.Second, "the job's DLQ entry and an empty jobs stream", func() bool {
		dlq, err := res.DLQ.Info(ctx)
		if err != nil || dlq.State.Msgs != 1 {
			return false
		}
		jobs, err := res.Jobs.Info(ctx)
		return err == nil && jobs.State.Msgs == 0
	})
	m, err := res.DLQ.GetLastMsgForSubject(ctx, names.DLQSubject(protocol.ReasonMalformed))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(job)
	if got := m.Header.Get(protocol.HeaderTruncated); got != strconv.Itoa(len(job)) {
		t.Errorf("%s: %q, want %d", protocol.HeaderTruncated, got, len(job))
	}
	if got, want := m.Header.Get(protocol.HeaderOrigDigest), "sha256:"+hex.EncodeToString(sum[:]); got != want {
		t.Errorf("%s: %q, want %q", protocol.HeaderOrigDigest, got, want)
	}
	if len(m.Data) == 0 || len(m.Data) >= len(job) || !bytes.HasPrefix(job, m.Data) {
		t.Errorf("DLQ entry holds %d bytes, want a prefix of the %d-byte job", len(m.Data), len(job))
	}
	if m.Header.Get(protocol.HeaderReason) != string(protocol.ReasonMalformed) || m.Header.Get(protocol.HeaderError) == "" {
		t.Errorf("DLQ entry headers: %v", m.Header)
	}
	// As `baton dlq` reads it: through a worker's read relay.
	stop, err := worker.ServeReadRelay(ctx, js.Conn(), names, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	cl, err := client.New(js, names)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := cl.DLQ(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Truncated != int64(len(job)) || entries[0].Digest != "sha256:"+hex.EncodeToString(sum[:]) || entries[0].RunID != "big-1" {
		t.Fatalf("client DLQ entries: %+v", entries)
	}
}

// TestUndeadLetterableJobTerminated: a rejection the DLQ refuses every
// time (here the DLQ stream is gone) is tried a few times, then the job is
// terminated and counted, not redelivered for ever.
func TestUndeadLetterableJobTerminated(t *testing.T) {
	s := testenv.RunServer(t)
	_, js := testenv.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names := protocol.MustNames("")
	res, err := provision.Ensure(ctx, js, names, provision.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(ctx, names.DLQStream()); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, names.RunJobSubject(), []byte(`{"runId":"bad-1",`)); err != nil {
		t.Fatal(err)
	}
	var dropped atomic.Int32
	in := consumer.New(js, names, config.Default(), consumer.WithSelf("/bin/true"),
		consumer.WithFetchWait(200*time.Millisecond), consumer.WithRejectWait(100*time.Millisecond),
		consumer.WithOnDrop(func(r protocol.Reason) {
			if r != protocol.ReasonMalformed {
				t.Errorf("dropped for %s, want %s", r, protocol.ReasonMalformed)
			}
			dropped.Add(1)
		}))
	runIntake(t, ctx, in)
	testenv.WaitFor(t, 10*time.Second, "the job dropped and the jobs stream empty", func() bool {
		jobs, err := res.Jobs.Info(ctx)
		return dropped.Load() == 1 && err == nil && jobs.State.Msgs == 0
	})
	c, err := js.Consumer(ctx, names.JobsStream(), consumer.DurableName)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing is delivered again: no more drops, nothing pending.
	time.Sleep(500 * time.Millisecond)
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if dropped.Load() != 1 || info.NumPending != 0 || info.NumAckPending != 0 || info.NumRedelivered != 0 {
		t.Fatalf("after the drop: %d drops, %d pending, %d ack pending, %d redelivered",
			dropped.Load(), info.NumPending, info.NumAckPending, info.NumRedelivered)
	}
}
