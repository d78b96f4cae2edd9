package test

import (
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
	s := runShipped(t, opts)
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
