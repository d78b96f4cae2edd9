package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/protocol"
)

// WaitChain reads a run's chain from its start until its terminal status.
func WaitChain(t *testing.T, js jetstream.JetStream, names protocol.Names, runID string, timeout time.Duration) []jetstream.Msg {
	t.Helper()
	msgs, err := ReadChain(js, names, runID, timeout, nil)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// ReadChain reads a run's chain from its start until its terminal status.
// When none comes within timeout it returns what it read and an error
// that tells how the reader spent its time. onConsumer, if not nil, learns
// the server of each consumer it follows with.
//
// It follows the run with one ordered consumer (Messages, not Next: an
// ordered consumer's Next creates a server-side consumer per message, and
// nats-server 2.15 caps a stream at 1,000 consumers by default), and
// bounds the consumer's resets, which nats.go otherwise retries forever.
// nats.go (v1.55) arms the missing-heartbeat check per call of Next, so a
// Next shorter than two heartbeats never notices a pull its server lost:
// heartbeats come every chainHeartbeat and each Next waits three of them,
// and a consumer silent for chainSilence while the run has no terminal
// status is replaced too, each time by a new one after the last message
// read.
func ReadChain(js jetstream.JetStream, names protocol.Names, runID string, timeout time.Duration, onConsumer func(server string)) ([]jetstream.Msg, error) {
	deadline := time.Now().Add(timeout)
	var msgs []jetstream.Msg
	var trace []string
	note := func(format string, args ...any) {
		trace = append(trace, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
		if len(trace) > 40 {
			trace = trace[len(trace)-40:]
		}
	}
	var it jetstream.MessagesContext
	var c jetstream.Consumer
	var where string
	var lastMsg time.Time
	defer func() {
		if it != nil {
			it.Stop()
		}
	}()
	for {
		if time.Now().After(deadline) {
			return msgs, fmt.Errorf("run %s: no terminal status within %v (%d messages read); the reader's last steps:\n%s", runID, timeout, len(msgs), strings.Join(trace, "\n"))
		}
		if it == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			opts := jetstream.OrderedConsumerConfig{FilterSubjects: []string{names.RunFilter(runID)}, MaxResetAttempts: 5}
			if len(msgs) > 0 {
				md, _ := msgs[len(msgs)-1].Metadata()
				opts.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
				opts.OptStartSeq = md.Sequence.Stream + 1
			}
			var err error
			if c, err = js.OrderedConsumer(ctx, names.EventsStream(), opts); err == nil {
				it, err = c.Messages(jetstream.PullHeartbeat(chainHeartbeat))
			}
			cancel()
			if err != nil {
				note("ordered consumer from seq %d: %v", opts.OptStartSeq, err)
				it = nil
				time.Sleep(200 * time.Millisecond)
				continue
			}
			lastMsg, where = time.Now(), ""
		}
		if info := c.CachedInfo(); info != nil && info.Cluster != nil && info.Cluster.Leader != where {
			where = info.Cluster.Leader
			if onConsumer != nil {
				onConsumer(where)
			}
		}
		start := time.Now()
		// nats.go v1.55 re-creates a lost ordered consumer inside Next, blind
		// to NextMaxWait (up to MaxResetAttempts JetStream API timeouts):
		// stopping the iterator bounds the call.
		bound := time.AfterFunc(3*chainHeartbeat+2*time.Second, it.Stop)
		m, err := it.Next(jetstream.NextMaxWait(3 * chainHeartbeat))
		bound.Stop()
		if err != nil {
			silent := time.Since(lastMsg)
			if errors.Is(err, nats.ErrTimeout) && silent < chainSilence {
				continue
			}
			note("next after %d messages: %v after %v, silent for %v (consumer on %q): a new consumer", len(msgs), err, time.Since(start).Round(time.Millisecond), silent.Round(time.Millisecond), where)
			it.Stop()
			it = nil
			continue
		}
		lastMsg = time.Now()
		if d := time.Since(start); d > 2*time.Second {
			note("next after %d messages took %v", len(msgs), d.Round(time.Millisecond))
		}
		msgs = append(msgs, m)
		if strings.HasSuffix(m.Subject(), ".status") {
			if st, err := protocol.ParseStatus(m.Data()); err == nil && st.Status.Terminal() {
				return msgs, nil
			}
		}
	}
}

// chainHeartbeat is the idle heartbeat ReadChain asks of its consumers
// (each Next waits longer than two of them, so a lost pull is noticed);
// chainSilence is how long it lets one deliver nothing before it replaces
// it, which costs nothing when the run is merely quiet: the new consumer
// resumes after the last message read.
const (
	chainHeartbeat = time.Second
	chainSilence   = 10 * time.Second
)

// SubmitJob publishes a job, retrying while NATS is away.
func SubmitJob(t *testing.T, js jetstream.JetStream, names protocol.Names, job map[string]any) {
	b, _ := json.Marshal(job)
	for attempt := 0; ; attempt++ {
		msg := nats.NewMsg(names.RunJobSubject())
		msg.Data = b
		msg.Header.Set(nats.MsgIdHdr, job["runId"].(string))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := js.PublishMsg(ctx, msg)
		cancel()
		if err == nil {
			return
		}
		if attempt > 100 {
			t.Fatalf("submit %s: %v", job["runId"], err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// LastStatus is the last status on a run's chain.
func LastStatus(t *testing.T, js jetstream.JetStream, names protocol.Names, runID string) protocol.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := js.Stream(ctx, names.EventsStream())
	if err != nil {
		t.Fatal(err)
	}
	m, err := stream.GetLastMsgForSubject(ctx, names.StatusSubject(runID))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return protocol.Status{}
	}
	if err != nil {
		t.Fatal(err)
	}
	st, err := protocol.ParseStatus(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
