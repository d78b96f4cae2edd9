package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/batonhq/baton/internal/testenv"
)

// TestUpstreamDirectConsumersBypassMaxConsumers documents F11, reported
// upstream (docs/security.md, "Upstream reports"): nats-server 2.15.2
// exempts a consumer whose config says "direct": true (meant for the
// server's own mirrors and sources) from the account's max_consumers, and
// takes the flag from any user. Baton does not rely on the limit: clients
// and run tokens have no consumer create at all. When a server upgrade
// fixes it, this test fails: update the report's status and the test.
func TestUpstreamDirectConsumersBypassMaxConsumers(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "limits.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`listen: "127.0.0.1:%d"
jetstream { store_dir: %q }
accounts {
  T = {
    jetstream = { max_file: 1G, max_mem: 64M, max_streams: 4, max_consumers: 2 }
    users = [{user: u, password: p}]
  }
}
`, testenv.FreePort(t), filepath.Join(dir, "js"))), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	s := testenv.RunShipped(t, opts)
	nc, err := nats.Connect(s.ClientURL(), nats.UserInfo("u", "p"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	api := func(subject, body string) (errCode int, desc string) {
		t.Helper()
		m, err := nc.Request(subject, []byte(body), 5*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", subject, err)
		}
		var r struct {
			Error *struct {
				Code        int    `json:"err_code"`
				Description string `json:"description"`
			} `json:"error"`
		}
		if err := json.Unmarshal(m.Data, &r); err != nil {
			t.Fatalf("%s: %v: %s", subject, err, m.Data)
		}
		if r.Error == nil {
			return 0, ""
		}
		return r.Error.Code, r.Error.Description
	}
	if code, desc := api("$JS.API.STREAM.CREATE.S", `{"name":"S","subjects":["s.>"]}`); code != 0 {
		t.Fatalf("create stream: %d %s", code, desc)
	}
	consumer := func(name string, direct bool) string {
		return fmt.Sprintf(`{"stream_name":"S","config":{"name":%q,"direct":%v,"deliver_subject":"d.%s","ack_policy":"none"}}`, name, direct, name)
	}
	for i := range 2 {
		if code, desc := api("$JS.API.CONSUMER.CREATE.S.c"+fmt.Sprint(i), consumer(fmt.Sprint("c", i), false)); code != 0 {
			t.Fatalf("consumer %d within the limit: %d %s", i, code, desc)
		}
	}
	if code, _ := api("$JS.API.CONSUMER.CREATE.S.c2", consumer("c2", false)); code == 0 {
		t.Fatal("a third ordinary consumer past max_consumers 2 was accepted: the limit itself no longer works as this test assumes")
	}
	accepted := 0
	for i := range 20 {
		if code, _ := api("$JS.API.CONSUMER.CREATE.S.x"+fmt.Sprint(i), consumer(fmt.Sprint("x", i), true)); code == 0 {
			accepted++
		}
	}
	if accepted == 0 {
		t.Fatalf("nats-server %s refuses direct consumers past max_consumers: F11 is fixed upstream; update docs/security.md", server.VERSION)
	}
	t.Logf("nats-server %s: %d of 20 \"direct\": true consumers accepted past max_consumers 2 (F11)", server.VERSION, accepted)
}

// TestUpstreamDirectGetAnswerReflected documents F0's second route, reported
// upstream (docs/security.md, "Upstream reports"): nats-server 2.15.2 sends
// a direct get's answer to whatever reply subject the requester chose,
// and an answer sent onto a JetStream API subject is taken as a request of
// that API: a direct get of a missing key with the reply
// $JS.API.STREAM.DELETE.<S> deleted S. Baton gives no client or token a
// direct get (the workers' read relay answers only into the requester's
// inbox). When a server upgrade stops it, this test fails: update the
// report's status and the test.
func TestUpstreamDirectGetAnswerReflected(t *testing.T) {
	s := testenv.RunServer(t)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	req := func(subject, body string) {
		t.Helper()
		m, err := nc.Request(subject, []byte(body), 5*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", subject, err)
		}
		if bytes.Contains(m.Data, []byte(`"error"`)) {
			t.Fatalf("%s: %s", subject, m.Data)
		}
	}
	req("$JS.API.STREAM.CREATE.VICTIM", `{"name":"VICTIM","subjects":["victim.>"]}`)
	req("$JS.API.STREAM.CREATE.KV_R", `{"name":"KV_R","subjects":["$KV.R.>"],"allow_direct":true,"max_msgs_per_subject":1}`)
	// The direct get of a missing key, its answer pointed at the API.
	if err := nc.PublishRequest("$JS.API.DIRECT.GET.KV_R.$KV.R.missing", "$JS.API.STREAM.DELETE.VICTIM", nil); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	deleted := false
	deadline := time.Now().Add(5 * time.Second)
	for !deleted && time.Now().Before(deadline) {
		m, err := nc.Request("$JS.API.STREAM.INFO.VICTIM", nil, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		deleted = bytes.Contains(m.Data, []byte(`"err_code":10059`)) // stream not found
		if !deleted {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if !deleted {
		t.Fatalf("nats-server %s no longer takes a direct get's answer for an API request: the route is closed upstream; update docs/security.md", server.VERSION)
	}
	t.Logf("nats-server %s: a direct get answered onto $JS.API.STREAM.DELETE.VICTIM deleted the stream", server.VERSION)
}
