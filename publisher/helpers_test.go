package publisher_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/internal/provision"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
)

var names = protocol.MustNames("")

const leaseTTL = time.Second

// backend is one JetStream deployment the scenarios run against: a single
// server (R1) or a 3-node cluster (R3).
type backend struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	res    *provision.Resources
	leases *kv.Leases
	// servers are the deployment's servers, to see a subscription's
	// interest reach each of them.
	servers []*server.Server
}

func r1(t *testing.T) *backend {
	t.Helper()
	s := testenv.RunServer(t)
	nc, js := testenv.Connect(t, s)
	b := provisioned(t, nc, js, 1)
	b.servers = []*server.Server{s}
	return b
}

func r3(t *testing.T) *backend {
	t.Helper()
	servers := testenv.RunCluster(t, 3)
	nc, js := testenv.ConnectCluster(t, servers)
	b := provisioned(t, nc, js, 3)
	b.servers = servers
	return b
}

func provisioned(t *testing.T, nc *nats.Conn, js jetstream.JetStream, replicas int) *backend {
	return provisionedTB(t, nc, js, replicas)
}

func provisionedTB(t testing.TB, nc *nats.Conn, js jetstream.JetStream, replicas int) *backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	res, err := provision.Ensure(ctx, js, names, provision.Options{Replicas: replicas, LeaseTTL: leaseTTL})
	if err != nil {
		t.Fatal(err)
	}
	return &backend{nc: nc, js: js, res: res, leases: kv.NewStore[kv.LeaseRecord](res.Leases)}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// stored is a message of a run's chain as the stream holds it.
type stored struct {
	seq     uint64
	subject string
	data    []byte
	header  nats.Header
}

func (m stored) get(h string) string { return m.header.Get(h) }

// chain returns every message the stream holds for runID, in order.
func chain(t *testing.T, b *backend, runID string) []stored {
	t.Helper()
	ctx := ctxT(t)
	filter := names.RunFilter(runID)
	info, err := b.res.Events.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, n := range info.State.Subjects {
		want += int(n)
	}
	if want == 0 {
		return nil
	}
	cons, err := b.js.OrderedConsumer(ctx, names.EventsStream(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		t.Fatal(err)
	}
	var out []stored
	for len(out) < want {
		n := len(out)
		batch, err := cons.Fetch(want-len(out), jetstream.FetchMaxWait(5*time.Second))
		if err == nil {
			for m := range batch.Messages() {
				md, err := m.Metadata()
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, stored{seq: md.Sequence.Stream, subject: m.Subject(), data: m.Data(), header: m.Headers()})
			}
			err = batch.Error()
		}
		if errors.Is(err, nats.ErrNoResponders) && ctx.Err() == nil {
			// In a cluster the consumer's interest reaches the client's
			// server over a route a moment after it is made: ask again.
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(out) == n {
			t.Fatalf("chain of %s: fetched %d of %d messages", runID, n, want)
		}
	}
	return out
}

// msgIDs lists the Msg-Ids of a chain.
func msgIDs(ms []stored) []string {
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.get(protocol.HeaderMsgID)
	}
	return ids
}

func lineID(runID string, end int64) string { return runID + ":" + strconv.FormatInt(end, 10) }

// liveSub is a core subscription on a run's subjects, as a UI would hold:
// it sees what the stream republishes once stored.
type liveSub struct {
	mu   sync.Mutex
	msgs []stored
}

// live subscribes to runID's subjects before anything is published.
func live(t *testing.T, b *backend, runID string) *liveSub {
	t.Helper()
	l := &liveSub{}
	sub, err := b.nc.Subscribe(names.RunFilter(runID), func(m *nats.Msg) {
		seq, _ := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
		l.mu.Lock()
		l.msgs = append(l.msgs, stored{seq: seq, subject: m.Subject, data: m.Data, header: m.Header})
		l.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := b.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// In a cluster the interest reaches the stream leader's server (which
	// republishes what it stores) over a route, asynchronously: wait,
	// bounded, until every server has it.
	probe := names.StatusSubject(runID)
	testenv.WaitFor(t, 10*time.Second, "the live subscription's interest on every server", func() bool {
		for _, s := range b.servers {
			if !s.GlobalAccount().SubscriptionInterest(probe) {
				return false
			}
		}
		return true
	})
	return l
}

// equals asserts the subscription received exactly the chain ms: each
// stored message once, in order, with its subject, sequence and data, and
// nothing else (no retried duplicate, no refused zombie message).
func (l *liveSub) equals(t *testing.T, ms []stored) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		l.mu.Lock()
		got := slices.Clone(l.msgs)
		l.mu.Unlock()
		if len(got) >= len(ms) || time.Now().After(deadline) {
			// Extra messages would come right after the last expected one.
			time.Sleep(100 * time.Millisecond)
			l.mu.Lock()
			got = slices.Clone(l.msgs)
			l.mu.Unlock()
			if len(got) != len(ms) {
				t.Fatalf("live subscriber got %d messages %v, the chain has %d %v", len(got), msgIDs(got), len(ms), msgIDs(ms))
			}
			for i, m := range ms {
				g := got[i]
				if g.seq != m.seq || g.subject != m.subject || !bytes.Equal(g.data, m.data) || g.get(protocol.HeaderMsgID) != m.get(protocol.HeaderMsgID) {
					t.Fatalf("live message %d: seq %d %s %q id %s; stored seq %d %s %q id %s", i,
						g.seq, g.subject, g.data, g.get(protocol.HeaderMsgID), m.seq, m.subject, m.data, m.get(protocol.HeaderMsgID))
				}
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
