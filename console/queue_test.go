package console_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
)

// TestQueueAPI: GET api/queue answers the queue view the workers give,
// filtered by ?key= and ?limit=, which it checks. testenv's stand-in
// answers the queue request IN PLACE OF THE WORKERS' ENDPOINT (tested in
// package worker). With nobody answering it is 503, as the other calls a
// worker answers; a worker's refusal is 502 with its sentence.
func TestQueueAPI(t *testing.T) {
	e := setup(t)
	var rep map[string]any
	if code := getStatus(t, e.srv.URL+"/api/queue", &rep); code != 503 || !strings.Contains(rep["error"].(string), "no worker answered") {
		t.Fatalf("no worker: %d %v", code, rep)
	}
	sample := testenv.SampleQueue(time.Now().UTC().Truncate(time.Second))
	standIn := testenv.StandInForWorkersQueue(t, e.nc, names, sample)

	var v protocol.QueueView
	get(t, e.srv.URL+"/api/queue", &v)
	if !reflect.DeepEqual(v, sample) {
		t.Fatalf("api/queue: %+v\nwant %+v", v, sample)
	}
	get(t, e.srv.URL+"/api/queue?key=acme&limit=2", &v)
	if len(v.Keys) != 1 || v.Keys[0].Key != "acme" || v.Keys[0].Waiting != 4 || len(v.Keys[0].Jobs) != 2 ||
		v.Keys[0].Jobs[1].Reason != protocol.WaitBehind || v.Workers != 3 {
		t.Fatalf("api/queue?key=acme&limit=2: %+v", v)
	}
	// A key with nothing waiting or running: an empty list, not null.
	var raw map[string]any
	get(t, e.srv.URL+"/api/queue?key=hooli", &raw)
	if keys, ok := raw["keys"].([]any); !ok || len(keys) != 0 {
		t.Fatalf("api/queue?key=hooli: %v", raw)
	}
	want := []protocol.QueueRequest{{Limit: 10}, {Key: "acme", Limit: 2}, {Key: "hooli", Limit: 10}}
	if got := standIn.Requests(); !reflect.DeepEqual(got, want) {
		t.Fatalf("requests %+v, want %+v", got, want)
	}
	for _, tc := range []struct{ query, want string }{
		{"?key=a.b", "must match [A-Za-z0-9_-]{1,64}"},
		{"?key=a%20b", "must match"},
		{"?limit=x", `limit "x": not a number`},
		{"?limit=101", "queue limit 101, want 0"},
		{"?limit=-1", "queue limit -1"},
	} {
		if code := getStatus(t, e.srv.URL+"/api/queue"+tc.query, &rep); code != 400 || !strings.Contains(rep["error"].(string), tc.want) {
			t.Errorf("api/queue%s: %d %v, want 400 %q", tc.query, code, rep, tc.want)
		}
	}
	if n := len(standIn.Requests()); n != len(want) {
		t.Fatalf("refused queries sent %d requests", n-len(want))
	}
	standIn.Stop()
	sub, err := e.nc.Subscribe(names.ReadQueueSubject(), func(m *nats.Msg) {
		r := nats.NewMsg(m.Reply)
		r.Header.Set(micro.ErrorCodeHeader, protocol.QueueFailed)
		r.Header.Set(micro.ErrorHeader, "cannot read the slots")
		_ = m.RespondMsg(r)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if code := getStatus(t, e.srv.URL+"/api/queue", &rep); code != 502 || rep["error"] != "read the queue: refused (500): cannot read the slots" {
		t.Errorf("a refusal: %d %v", code, rep)
	}
}
