package auth

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/internal/provision"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/runtoken"
	"github.com/batonhq/baton/worker"
)

// TestRunTokenOverWebSocket runs nats-server with deploy/nats-browser.conf
// as shipped (ports substituted) and a run token: a real nats.go client
// over ws:// reads its run from the start and live, through the workers'
// read relay (client.Watch) and a plain subscription, and sends its input
// only with an input token; it is refused another run's subjects and
// relay, any consumer create or direct get (F8: no durable outlives the
// token), the jobs stream, the KV buckets, a plain TCP connection, and
// everything once the token expires.
func TestRunTokenOverWebSocket(t *testing.T) {
	seed, pub, err := runtoken.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	pw := map[string]string{"worker": "w-secret", "worker-svc": "s-secret", "client": "c-secret", "viewer": "v-secret", "tools": "t-secret", "console": "k-secret"}
	for user, p := range pw {
		t.Setenv(passwordVar(user), p)
	}
	t.Setenv("BATON_CALLOUT_ISSUER", pub)
	wsPort := testenv.FreePort(t)
	opts := testenv.ShippedConfig(t, "../..", t.TempDir(), "nats-browser.conf", func(conf string) string {
		edited := strings.Replace(conf, `listen: "127.0.0.1:9222"`, fmt.Sprintf(`listen: "127.0.0.1:%d"`, wsPort), 1)
		if edited == conf {
			t.Fatal("deploy/nats-browser.conf no longer has the websocket listen line this test substitutes")
		}
		return edited
	})
	// Every user of nats-auth.conf is there (its tools user was once
	// missing), with nats-auth.conf's permissions, unchanged.
	single := map[string]*server.Permissions{}
	for _, u := range testenv.ShippedConfig(t, "../..", t.TempDir(), "nats-auth.conf", nil).Users {
		single[u.Username] = u.Permissions
	}
	for _, u := range opts.Users {
		if p, ok := single[u.Username]; ok && !reflect.DeepEqual(p, u.Permissions) {
			t.Errorf("%s's permissions differ from nats-auth.conf's:\n%+v\n%+v", u.Username, u.Permissions, p)
		}
		delete(single, u.Username)
	}
	for name := range single {
		t.Errorf("nats-browser.conf has no user %s of nats-auth.conf", name)
	}
	s := testenv.RunShipped(t, opts)
	tcpURL := func(user string) string {
		return fmt.Sprintf("nats://%s:%s@%s", user, pw[user], strings.TrimPrefix(s.ClientURL(), "nats://"))
	}
	wsURL := fmt.Sprintf("ws://127.0.0.1:%d", wsPort)
	names := protocol.MustNames("")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	// The worker provisions, serves the read relay and publishes two runs'
	// chains.
	wnc, err := nats.Connect(tcpURL("worker"), nats.CustomInboxPrefix(worker.InboxPrefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wnc.Close)
	wjs, _ := jetstream.New(wnc)
	if _, err := provision.Ensure(ctx, wjs, names, provision.Options{}); err != nil {
		t.Fatal(err)
	}
	// Served as a worker serves it: requests on worker-svc's connection,
	// direct gets on the worker's.
	snc, err := nats.Connect(tcpURL("worker-svc"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(snc.Close)
	stopRelay, err := worker.ServeReadRelay(ctx, wnc, names, zerolog.Nop(), worker.WithReadRelayServiceConn(snc))
	if err != nil {
		t.Fatal(err)
	}
	defer stopRelay()
	publish := func(run, line string) {
		t.Helper()
		if _, err := wjs.Publish(ctx, names.IngestSubject(run, protocol.KindEvents), []byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		publish("run-a", fmt.Sprintf(`{"a":%d}`, i))
		publish("run-b", fmt.Sprintf(`{"b":%d}`, i))
	}

	// The console's connection answers the callout.
	cnc, err := nats.Connect(tcpURL("console"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cnc.Close)
	iss, err := runtoken.NewIssuer(seed, names)
	if err != nil {
		t.Fatal(err)
	}
	if err := iss.Serve(ctx, cnc); err != nil {
		t.Fatal(err)
	}

	tok, err := iss.Issue("run-a", time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var denied []string
	bc, err := nats.Connect(wsURL, nats.Token(tok), nats.CustomInboxPrefix(runtoken.InboxPrefix("run-a")),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				mu.Lock()
				denied = append(denied, err.Error())
				mu.Unlock()
			}
		}))
	if err != nil {
		t.Fatalf("connect over WebSocket with the run token: %v", err)
	}
	t.Cleanup(bc.Close)
	waitDenied := func(what, subject string) {
		t.Helper()
		testenv.WaitFor(t, 5*time.Second, "a permissions violation for "+what+" "+subject, func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, d := range denied {
				if strings.Contains(d, what) && strings.Contains(d, subject+`"`) {
					return true
				}
			}
			return false
		})
	}

	// Live subscription of its run, and a watch from the start through
	// the relay.
	live, err := bc.SubscribeSync(names.RunFilter("run-a"))
	if err != nil {
		t.Fatal(err)
	}
	if err := bc.Flush(); err != nil {
		t.Fatal(err)
	}
	bjs, _ := jetstream.New(bc)
	seen := make(chan string, 16)
	watchDone := make(chan error, 1)
	errEnough := errors.New("six events seen")
	bcl, err := client.New(bjs, names)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		n := 0
		_, err := bcl.Watch(ctx, "run-a", func(ev client.Event) error {
			seen <- string(ev.Data)
			if n++; n == 6 {
				return errEnough
			}
			return nil
		})
		watchDone <- err
	}()
	var watchErr error
	watchEnded := false
	for i := range 6 {
		if i == 5 {
			publish("run-a", `{"a":5}`) // live, once the history is read
		}
		var got string
		select {
		case got = <-seen:
		case watchErr = <-watchDone:
			// The watch ends as soon as its sixth event is handed over,
			// so both may be ready: that event is already in seen.
			watchEnded = true
			if !errors.Is(watchErr, errEnough) || len(seen) == 0 {
				t.Fatalf("watch of its run ended after %d events: %v", i, watchErr)
			}
			got = <-seen
		case <-ctx.Done():
			t.Fatalf("watch of its run: event %d not seen", i)
		}
		if want := fmt.Sprintf(`{"a":%d}`, i); got != want {
			t.Fatalf("watch of its run, event %d: %s, want %s", i, got, want)
		}
	}
	if !watchEnded {
		watchErr = <-watchDone
	}
	if !errors.Is(watchErr, errEnough) {
		t.Fatalf("watch of its run: %v", watchErr)
	}
	if m, err := live.NextMsg(5 * time.Second); err != nil || string(m.Data) != `{"a":5}` {
		t.Fatalf("live subscription: %v %v", m, err)
	}

	// Refused: another run, its own input without --input, the jobs
	// stream, the buckets, anything else.
	if _, err := bc.SubscribeSync(names.RunFilter("run-b")); err != nil {
		t.Fatal(err)
	}
	waitDenied("Subscription", names.RunFilter("run-b"))
	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	defer cancelShort()
	if _, err := bjs.OrderedConsumer(short, names.EventsStream(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{names.RunFilter("run-b")}}); err == nil {
		t.Fatal("an ordered consumer of another run was created")
	}
	// F8: a durable of its own run, which would outlive the token.
	durCtx, cancelDur := context.WithTimeout(ctx, 2*time.Second)
	defer cancelDur()
	if _, err := bjs.CreateConsumer(durCtx, names.EventsStream(), jetstream.ConsumerConfig{Durable: "evil", FilterSubject: names.RunFilter("run-a")}); err == nil {
		t.Fatal("the token created a durable consumer of its run (F8)")
	}
	if _, err := bjs.Stream(short, names.JobsStream()); err == nil {
		t.Fatal("the jobs stream's info was read")
	}
	if _, err := bjs.KeyValue(short, names.RunsBucket()); err == nil {
		t.Fatal("the runs bucket was opened")
	}
	for _, subj := range []string{
		names.InputSubject("run-a"), names.RunJobSubject(), names.CancelSubject("run-a"),
		"$JS.API.DIRECT.GET.KV_BATON_RUNS.$KV.BATON_RUNS.run-a", "$JS.API.CONSUMER.CREATE.BATON_JOBS.x.baton.jobs.run",
		"$JS.API.CONSUMER.DELETE.BATON_EVENTS.x", names.IngestSubject("run-a", protocol.KindEvents),
		// F8: a 20-second token's durables filled BATON_EVENTS' consumer
		// limit for good; and every other raw read.
		"$JS.API.CONSUMER.CREATE.BATON_EVENTS.evil.baton.runs.run-a.>", "$JS.API.CONSUMER.DURABLE.CREATE.BATON_EVENTS.evil",
		"$JS.API.CONSUMER.CREATE.BATON_EVENTS", "$JS.API.CONSUMER.MSG.NEXT.BATON_EVENTS.evil",
		"$JS.API.STREAM.INFO.BATON_EVENTS", "$JS.API.STREAM.MSG.GET.BATON_EVENTS", "$JS.API.DIRECT.GET.BATON_EVENTS",
		// Another run through the relay; the lists it may not read.
		names.ReadEventsSubject("run-b"), names.ReadRunSubject("run-a"), names.ReadRunsSubject(), names.ReadDLQSubject(),
	} {
		if err := bc.Publish(subj, []byte("x")); err != nil {
			t.Fatal(err)
		}
		waitDenied("Publish", subj)
	}
	for _, subj := range []string{"_INBOX.>", "baton.>", "$KV.BATON_RUNS.>", runtoken.InboxPrefix("run-b") + ".>"} {
		if _, err := bc.SubscribeSync(subj); err != nil {
			t.Fatal(err)
		}
		waitDenied("Subscription", subj)
	}

	// The token for run baton_worker may not read the workers' inbox
	// (F1: with the inbox _INBOX_<runId> it could, and saw every job).
	wtok, err := iss.Issue("baton_worker", time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	wc, err := nats.Connect(wsURL, nats.Token(wtok), nats.CustomInboxPrefix(runtoken.InboxPrefix("baton_worker")),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				mu.Lock()
				denied = append(denied, err.Error())
				mu.Unlock()
			}
		}))
	if err != nil {
		t.Fatalf("connect with run baton_worker's token: %v", err)
	}
	t.Cleanup(wc.Close)
	if _, err := wc.SubscribeSync(worker.InboxPrefix + ".>"); err != nil {
		t.Fatal(err)
	}
	waitDenied("Subscription", worker.InboxPrefix+".>")

	// An input token may send the run's input, and only that run's.
	itok, err := iss.Issue("run-a", time.Minute, true)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	denied = nil
	mu.Unlock()
	ic, err := nats.Connect(wsURL, nats.Token(itok), nats.CustomInboxPrefix(runtoken.InboxPrefix("run-a")),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			mu.Lock()
			denied = append(denied, err.Error())
			mu.Unlock()
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ic.Close)
	if err := ic.Publish(names.InputSubject("run-a"), []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := ic.Publish(names.InputSubject("run-b"), []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := ic.Flush(); err != nil {
		t.Fatal(err)
	}
	// Exactly one violation: the input of run-a went through.
	testenv.WaitFor(t, 5*time.Second, "the input to run-b refused", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(denied) == 1 && strings.Contains(denied[0], names.InputSubject("run-b")+`"`)
	})

	// Not over plain TCP, not with a token of another key.
	if nc, err := nats.Connect(s.ClientURL(), nats.Token(tok)); err == nil {
		nc.Close()
		t.Fatal("the run token connected over plain TCP")
	}
	otherSeed, _, _ := runtoken.NewKey()
	other, _ := runtoken.NewIssuer(otherSeed, names)
	forged, _ := other.Issue("run-a", time.Minute, true)
	if nc, err := nats.Connect(wsURL, nats.Token(forged)); err == nil {
		nc.Close()
		t.Fatal("a token signed by another key connected")
	}
	if nc, err := nats.Connect(wsURL, nats.Token("garbage")); err == nil {
		nc.Close()
		t.Fatal("garbage connected")
	}

	// Expiry: the server closes the connection, and the token no longer
	// connects.
	stok, err := iss.Issue("run-a", 2*time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	sc, err := nats.Connect(wsURL, nats.Token(stok), nats.NoReconnect(), nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the server kept the connection open 10s after the token expired")
	}
	if nc, err := nats.Connect(wsURL, nats.Token(stok)); err == nil {
		nc.Close()
		t.Fatal("an expired token connected")
	}
}
