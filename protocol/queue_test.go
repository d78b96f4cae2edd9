package protocol

import (
	"errors"
	"strings"
	"testing"
)

func TestDecodeQueueRequest(t *testing.T) {
	for _, tc := range []struct {
		body string
		want QueueRequest
		bad  bool
	}{
		{body: "", want: QueueRequest{Limit: DefaultQueueJobs}},
		{body: " \n", want: QueueRequest{Limit: DefaultQueueJobs}},
		{body: "{}", want: QueueRequest{Limit: DefaultQueueJobs}},
		{body: `{"key":"acme"}`, want: QueueRequest{Key: "acme", Limit: DefaultQueueJobs}},
		{body: `{"key":"acme_1-x","limit":100}`, want: QueueRequest{Key: "acme_1-x", Limit: 100}},
		{body: `{"limit":1}`, want: QueueRequest{Limit: 1}},
		{body: `{"limit":101}`, bad: true},
		{body: `{"limit":-1}`, bad: true},
		{body: `{"key":"a.b"}`, bad: true},
		{body: `{"key":"*"}`, bad: true},
		{body: `{"key":"` + strings.Repeat("k", 65) + `"}`, bad: true},
		{body: `{"key":"acme","runId":"x"}`, bad: true},
		{body: `{"key":"acme"} {}`, bad: true},
		{body: `null`, bad: true},
		{body: `"acme"`, bad: true},
		{body: `{"key":"acme","pad":"` + strings.Repeat("a", 5000) + `"}`, bad: true},
	} {
		got, err := DecodeQueueRequest([]byte(tc.body))
		if tc.bad {
			if !errors.Is(err, ErrBadRead) {
				t.Errorf("%.60s: %+v, %v; want an ErrBadRead", tc.body, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.body, got, err, tc.want)
		}
	}
}

func TestWaitReasonWords(t *testing.T) {
	for r, want := range map[WaitReason]string{
		WaitKeyLimit: "key at its limit", WaitBehind: "behind its key's earlier jobs",
		WaitProfileLimit: "profile at its limit on every free worker", WaitNoWorker: "no free worker",
		"later": "waiting (later)",
	} {
		if got := r.String(); got != want {
			t.Errorf("%s: %q, want %q", string(r), got, want)
		}
	}
}
