package consumer

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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
