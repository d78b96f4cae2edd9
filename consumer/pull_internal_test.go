package consumer

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/provision"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
)

func statusMsg(status, description string, data string) *nats.Msg {
	m := nats.NewMsg("_INBOX.x")
	if status != "" {
		m.Header.Set("Status", status)
	}
	if description != "" {
		m.Header.Set("Description", description)
	}
	m.Data = []byte(data)
	return m
}

// TestPullStatus: what the server sends back on a pull request's inbox,
// as nats-server writes it: a job, the request's normal end, a heartbeat,
// or its end by an error that names the status.
func TestPullStatus(t *testing.T) {
	for _, tc := range []struct {
		name       string
		msg        *nats.Msg
		job, done  bool
		err        error
		errMention string
	}{
		{"job", statusMsg("", "", `{"runId":"r"}`), true, false, nil, ""},
		{"job without headers or data", &nats.Msg{Subject: "x"}, true, false, nil, ""},
		{"job whose data is empty", statusMsg("", "", ""), true, false, nil, ""},
		{"a status header beside data is a job's", statusMsg("404", "No Messages", "x"), true, false, nil, ""},
		{"heartbeat", statusMsg("100", "Idle Heartbeat", ""), false, false, nil, ""},
		{"no messages", statusMsg("404", "No Messages", ""), false, true, nil, ""},
		{"request timeout", statusMsg("408", "Request Timeout", ""), false, true, nil, ""},
		{"no such consumer", statusMsg("503", "", ""), false, true, nats.ErrNoResponders, ""},
		{"consumer deleted", statusMsg("409", "Consumer Deleted", ""), false, true, jetstream.ErrConsumerDeleted, "409"},
		{"too many requests", statusMsg("409", "Exceeded MaxWaiting", ""), false, true, errPullStatus, "Exceeded MaxWaiting"},
		{"leadership change", statusMsg("409", "Leadership Change", ""), false, true, errPullStatus, "Leadership Change"},
		{"unknown status", statusMsg("418", "", ""), false, true, errPullStatus, "418"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job, done, err := pullStatus(tc.msg)
			if job != tc.job || done != tc.done {
				t.Fatalf("job, done = %v, %v; want %v, %v", job, done, tc.job, tc.done)
			}
			switch {
			case tc.err == nil && err != nil:
				t.Fatalf("error %v, want none", err)
			case tc.err != nil && !errors.Is(err, tc.err):
				t.Fatalf("error %v, want %v", err, tc.err)
			case tc.err != nil && !errors.Is(err, errPullStatus):
				t.Fatalf("error %v is not errPullStatus", err)
			case tc.errMention != "" && !strings.Contains(err.Error(), tc.errMention):
				t.Fatalf("error %q does not say %q", err, tc.errMention)
			}
		})
	}
}

// FuzzPullStatus: any status and description give exactly one of job,
// done or neither (a heartbeat), an error only with done, and never a
// panic.
func FuzzPullStatus(f *testing.F) {
	f.Add("", "", "{}")
	f.Add("100", "Idle Heartbeat", "")
	f.Add("409", "Consumer Deleted", "")
	f.Add("503", "", "")
	f.Fuzz(func(t *testing.T, status, description, data string) {
		job, done, err := pullStatus(statusMsg(status, description, data))
		if job && done || err != nil && !done || job && err != nil {
			t.Fatalf("status %q %q data %q: job %v, done %v, err %v", status, description, data, job, done, err)
		}
	})
}

// TestPulledMsg: a job from the intake's own pull request acts as the
// jetstream.Msg the handlers take, against a real server: its metadata,
// a redelivery after NakWithDelay, a bounded DoubleAck, and a Term with
// its reason that leaves nothing to deliver.
func TestPulledMsg(t *testing.T) {
	s := testenv.RunServer(t)
	_, js := testenv.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names := protocol.MustNames("")
	if _, err := provision.Ensure(ctx, js, names, provision.Options{}); err != nil {
		t.Fatal(err)
	}
	in := New(js, names, config.Default())
	cfg := jetstream.ConsumerConfig{Durable: "t", FilterSubject: names.RunJobSubject(), AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second}
	cons, err := in.create(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	pull := func(want int) jetstream.Msg {
		t.Helper()
		m, err := in.pullOne(ctx, "t", 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if m == nil {
			if want > 0 {
				t.Fatalf("no job within 2s, want delivery %d", want)
			}
			return nil
		}
		md, err := m.Metadata()
		if err != nil || md.Stream != names.JobsStream() || md.Consumer != "t" || int(md.NumDelivered) != want || md.Sequence.Stream == 0 {
			t.Fatalf("metadata %+v, %v; want stream %s, consumer t, delivery %d", md, err, names.JobsStream(), want)
		}
		return m
	}
	for i, data := range []string{"one", "two"} {
		if _, err := js.Publish(ctx, names.RunJobSubject(), []byte(data)); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	m := pull(1)
	if string(m.Data()) != "one" || m.Subject() != names.RunJobSubject() || m.Reply() == "" {
		t.Fatalf("job %q on %q (reply %q)", m.Data(), m.Subject(), m.Reply())
	}
	if err := m.InProgress(); err != nil {
		t.Fatal(err)
	}
	if err := m.NakWithDelay(300 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := m.Ack(); !errors.Is(err, nats.ErrMsgAlreadyAckd) {
		t.Fatalf("Ack after Nak: %v, want ErrMsgAlreadyAckd", err)
	}
	two := pull(1)
	if string(two.Data()) != "two" {
		t.Fatalf("second job %q, want two (one waits out its delay)", two.Data())
	}
	if err := two.DoubleAck(context.Background()); err != nil {
		t.Fatal(err)
	}
	again := pull(2)
	if string(again.Data()) != "one" {
		t.Fatalf("redelivered %q, want one", again.Data())
	}
	if err := again.TermWithReason("test"); err != nil {
		t.Fatal(err)
	}
	if m := pull(0); m != nil {
		t.Fatalf("a job after Term: %q", m.Data())
	}
	info, err := cons.Info(ctx)
	if err != nil || info.NumAckPending != 0 || info.NumPending != 0 {
		t.Fatalf("consumer %+v, %v: want nothing pending", info, err)
	}
}
