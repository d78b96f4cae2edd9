package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton/internal/provision"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/worker"
)

// TestReadRelayAttacks: the read relay answers only into the requester's
// own inbox, builds every filter itself from the subject's run id, and
// refuses bodies out of bounds. A hostile reply subject gets nothing (and
// the JetStream API subject it names is never reached: the streams, the
// record and the chain stay as they were); another run's id or object in
// the body gets a 400; a valid page holds the run's messages only.
func TestReadRelayAttacks(t *testing.T) {
	s := testenv.RunServer(t)
	nc, js := testenv.Connect(t, s)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	names := protocol.MustNames("")
	if _, err := provision.Ensure(ctx, js, names, provision.Options{}); err != nil {
		t.Fatal(err)
	}
	stop, err := worker.ServeReadRelay(ctx, nc, names, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for _, run := range []string{"r1", "r2"} {
		if _, err := js.Publish(ctx, names.IngestSubject(run, protocol.KindEvents), []byte(`{"run":"`+run+`"}`)); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := js.KeyValue(ctx, names.RunsBucket())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runs.Put(ctx, "r1", []byte{0x80}); err != nil {
		t.Fatal(err)
	}

	// Hostile replies: nothing is sent there.
	spies := map[string]*nats.Subscription{}
	var requests int
	for _, reply := range []string{
		"$JS.API.STREAM.DELETE." + names.EventsStream(),
		"$JS.API.STREAM.DELETE." + names.DLQStream(),
		"$JS.API.STREAM.PURGE.KV_" + names.RunsBucket(),
		"$KV." + names.RunsBucket() + ".r1",
		"$O." + names.OutputsBucket() + ".M.eA==",
		names.IngestSubject("r1", protocol.KindStatus),
		names.StatusSubject("r1"),
		protocol.RunInboxPrefix("r2") + ".x", // another run's token inbox
		protocol.WorkerInboxPrefix + ".x",
		"_INBOX.*", "_INBOX.>", "_INBOX", "_INBOX.",
		"_INBOX." + strings.Repeat("a", protocol.MaxReplyLen),
	} {
		if spy, err := nc.SubscribeSync(reply); err == nil { // "_INBOX." cannot be subscribed to
			spies[reply] = spy
		}
		for _, subject := range []string{
			names.ReadEventsSubject("r1"), names.ReadStatusSubject("r1"), names.ReadRunSubject("nosuchkey"),
			names.ReadRunsSubject(), names.ReadDLQSubject(), names.ReadObjectSubject("r1"), names.ReadChunksSubject("r1"),
		} {
			if err := nc.PublishMsg(&nats.Msg{Subject: subject, Reply: reply, Data: []byte(`{"name":"r1/diff.patch"}`)}); err != nil {
				t.Fatal(err)
			}
			requests++
		}
	}
	// The relay answers a later request on each endpoint only once it has
	// taken the earlier ones; give the earlier a moment more to show.
	for _, subject := range []string{names.ReadEventsSubject("r1"), names.ReadRunsSubject(), names.ReadDLQSubject()} {
		if _, err := nc.Request(subject, nil, 5*time.Second); err != nil {
			t.Errorf("%s after the hostile requests: %v", subject, err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	for reply, spy := range spies {
		// A spy on a wildcard sees other subjects too (the Requests'
		// answers): only an answer on the reply itself counts.
		for {
			m, err := spy.NextMsg(time.Millisecond)
			if err != nil {
				break
			}
			if m.Subject == reply && (m.Header.Get("Nats-Sequence") != "" || m.Header.Get("Status") != "" || m.Header.Get(micro.ErrorCodeHeader) != "") {
				t.Errorf("reply %.60q: the relay answered there (%q %v)", reply, m.Data, m.Header)
			}
		}
	}
	t.Logf("%d hostile requests, none answered", requests)
	for _, st := range []string{names.EventsStream(), names.DLQStream(), "KV_" + names.RunsBucket()} {
		if _, err := js.Stream(ctx, st); err != nil {
			t.Fatalf("stream %s after the hostile replies: %v", st, err)
		}
	}
	if e, err := runs.Get(ctx, "r1"); err != nil || e.Revision() != 1 {
		t.Fatalf("r1's record after the hostile replies: %v, %v", e, err)
	}

	// Its own inbox, a client's or the run token's: answered. Bad bodies
	// and other runs' objects: a 400.
	ask := func(subject, reply, body string) []*nats.Msg {
		t.Helper()
		sub, err := nc.SubscribeSync(reply)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		if err := nc.PublishMsg(&nats.Msg{Subject: subject, Reply: reply, Data: []byte(body)}); err != nil {
			t.Fatal(err)
		}
		var out []*nats.Msg
		for {
			m, err := sub.NextMsg(5 * time.Second)
			if err != nil {
				t.Fatalf("%s %s: waiting for the page's end: %v", subject, body, err)
			}
			out = append(out, m)
			if len(m.Data) == 0 || m.Header.Get(micro.ErrorCodeHeader) != "" {
				return out
			}
		}
	}
	for _, reply := range []string{nc.NewRespInbox(), protocol.RunInboxPrefix("r1") + ".abc.1"} {
		page := ask(names.ReadEventsSubject("r1"), reply, `{"from":0,"max":100}`)
		if len(page) != 2 || string(page[0].Data) != `{"run":"r1"}` || page[0].Header.Get("Nats-Subject") != names.EventsSubject("r1") ||
			page[1].Header.Get("Status") != "204" {
			t.Fatalf("r1's page to %s: %d messages %v", reply, len(page), page)
		}
	}
	for _, tc := range []struct{ subject, body string }{
		{names.ReadEventsSubject("r1"), `{"from":1,"runId":"r2"}`},
		{names.ReadEventsSubject("r1"), `{"filter":"baton.runs.>"}`},
		{names.ReadEventsSubject("r1"), `{"max":1025}`},
		{names.ReadEventsSubject("r1"), `{"max":-1}`},
		{names.ReadEventsSubject("r1"), `not json`},
		{names.ReadObjectSubject("r1"), `{"name":"r2/diff.patch"}`},
		{names.ReadChunksSubject("r1"), `{"name":"r2/files/secret"}`},
		{names.ReadObjectSubject("r1"), `{"name":"r1"}`},
	} {
		got := ask(tc.subject, nc.NewRespInbox(), tc.body)
		if len(got) != 1 || got[0].Header.Get(micro.ErrorCodeHeader) != "400" {
			t.Errorf("%s %s: got %d messages (%v), want one 400", tc.subject, tc.body, len(got), got[0].Header)
		}
	}
}
