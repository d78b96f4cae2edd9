package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/console"
	"github.com/batonhq/baton/internal/provision"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/outputs"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/worker"
)

var names = protocol.MustNames("baton")

const token = "t0ken-for-tests"

type env struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	res *provision.Resources
	srv *httptest.Server
	// stopRelay stops the read relay the workers would serve.
	stopRelay func() error
}

// serveRelay serves the read relay, as workers do, until the test ends or
// the stop it returns.
func serveRelay(t *testing.T, nc *nats.Conn) (stop func() error) {
	t.Helper()
	stop, err := worker.ServeReadRelay(t.Context(), nc, names, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// startWorker runs a real worker of cfg on node n1 until the test ends, and
// returns a client of the deployment.
func (e env) startWorker(t *testing.T, cfg *config.Config) *client.Client {
	t.Helper()
	w, err := worker.New(e.nc, cfg, worker.WithStateDir(testenv.StateDir(t)), worker.WithNode("n1"),
		worker.WithBinary(testenv.BatonBinary(t)))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Serve(t, "worker", w.Ready(), 20*time.Second, w.Run)
	c, err := client.New(e.js, names)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func setup(t *testing.T, opts ...console.Option) env {
	t.Helper()
	s := testenv.RunServer(t)
	nc, js := testenv.Connect(t, s)
	res, err := provision.Ensure(ctxT(t), js, names, provision.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The console reads run pages and records through the workers' read
	// relay.
	stop := serveRelay(t, nc)
	c, err := console.New(t.Context(), js, names, append([]console.Option{console.WithToken(token)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return env{nc: nc, js: js, res: res, srv: srv, stopRelay: stop}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// noRedirect keeps a client from following redirects, so tests see them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 20 * time.Second}

func TestNewNeedsAToken(t *testing.T) {
	s := testenv.RunServer(t)
	_, js := testenv.Connect(t, s)
	if _, err := console.New(t.Context(), js, names); err != console.ErrNoToken {
		t.Fatalf("New without a token: %v, want ErrNoToken", err)
	}
	if _, err := console.New(t.Context(), js, names, console.WithoutAuth()); err != nil {
		t.Fatalf("New WithoutAuth: %v", err)
	}
}

func TestAuth(t *testing.T) {
	e := setup(t)
	ro := setup(t, console.WithReadOnly())
	session := sessionCookie(t, e.srv.URL)
	for _, tc := range []struct {
		name     string
		srv      *httptest.Server
		method   string
		path     string
		header   map[string]string
		cookie   bool
		want     int
		location string // wanted Location prefix for redirects
	}{
		{"api without token", e.srv, "GET", "/api/runs", nil, false, 401, ""},
		{"page without token", e.srv, "GET", "/", nil, false, 303, "/login"},
		{"login page is open", e.srv, "GET", "/login", nil, false, 200, ""},
		{"bearer", e.srv, "GET", "/api/runs", map[string]string{"Authorization": "Bearer " + token}, false, 200, ""},
		{"wrong bearer", e.srv, "GET", "/api/runs", map[string]string{"Authorization": "Bearer nope"}, false, 401, ""},
		{"wrong bearer beats a cookie", e.srv, "GET", "/api/runs", map[string]string{"Authorization": "Bearer nope"}, true, 401, ""},
		{"basic is not bearer", e.srv, "GET", "/api/runs", map[string]string{"Authorization": "Basic " + token}, false, 401, ""},
		{"query token once", e.srv, "GET", "/?token=" + token + "&x=1", nil, false, 303, "/?x=1"},
		{"wrong query token", e.srv, "GET", "/api/runs?token=nope", nil, false, 401, ""},
		{"query token redirect stays here", e.srv, "GET", "//evil.example/x?token=" + token, nil, false, 303, "/evil.example/x"},
		{"cookie", e.srv, "GET", "/api/runs", nil, true, 200, ""},
		{"cookie post without the console header", e.srv, "POST", "/api/runs/r1/cancel", nil, true, 403, ""},
		{"cookie post from another origin", e.srv, "POST", "/api/runs/r1/cancel",
			map[string]string{"X-Baton-Console": "1", "Origin": "http://evil.example"}, true, 403, ""},
		{"cookie post from the console", e.srv, "POST", "/api/runs/r1/cancel",
			map[string]string{"X-Baton-Console": "1", "Origin": e.srv.URL}, true, 503, ""}, // past auth: no worker answers
		{"bearer post needs no console header", e.srv, "POST", "/api/runs/r1/cancel",
			map[string]string{"Authorization": "Bearer " + token}, false, 503, ""},
		{"post without token", e.srv, "POST", "/api/runs/r1/cancel", nil, false, 401, ""},
		{"bad run id", e.srv, "POST", "/api/runs/a.b/cancel", map[string]string{"Authorization": "Bearer " + token}, false, 400, ""},
		{"read-only refuses cancel", ro.srv, "POST", "/api/runs/r1/cancel", map[string]string{"Authorization": "Bearer " + token}, false, 403, ""},
		{"read-only refuses input", ro.srv, "POST", "/api/runs/r1/input", map[string]string{"Authorization": "Bearer " + token}, false, 403, ""},
		{"read-only still reads", ro.srv, "GET", "/api/runs", map[string]string{"Authorization": "Bearer " + token}, false, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, tc.srv.URL+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			if tc.cookie {
				req.AddCookie(session)
			}
			resp, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("%s %s: %d, want %d: %s", tc.method, tc.path, resp.StatusCode, tc.want, body)
			}
			if tc.location != "" && resp.Header.Get("Location") != tc.location {
				t.Fatalf("Location %q, want %q", resp.Header.Get("Location"), tc.location)
			}
		})
	}
}

// sessionCookie logs in with ?token= and checks the cookie it gets.
func sessionCookie(t *testing.T, base string) *http.Cookie {
	t.Helper()
	resp, err := noRedirect.Get(base + "/?token=" + url.QueryEscape(token))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if strings.HasPrefix(c.Name, "baton_console_") {
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
				t.Fatalf("session cookie %+v must be HttpOnly and SameSite=Strict", c)
			}
			if strings.Contains(c.Value, token) {
				t.Fatal("the session cookie holds the token itself")
			}
			return c
		}
	}
	t.Fatalf("no session cookie after ?token= (status %d)", resp.StatusCode)
	return nil
}

// TestTwoConsolesOneHost: a browser keeps cookies per host, not per port.
// Two consoles of one host (their own tokens) name their cookies apart, so
// logging in to the second leaves the first's session in the jar.
func TestTwoConsolesOneHost(t *testing.T) {
	a, b := setup(t), setup(t, console.WithToken("another-token"))
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	browser := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	for _, login := range []struct{ srv, tok string }{{a.srv.URL, token}, {b.srv.URL, "another-token"}} {
		resp, err := browser.Get(login.srv + "/?token=" + url.QueryEscape(login.tok))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	u, _ := url.Parse(a.srv.URL)
	cookies := jar.Cookies(u) // the host's, whichever port set them
	if len(cookies) != 2 || cookies[0].Name == cookies[1].Name {
		t.Fatalf("the jar holds %v: want one cookie per console, named apart", cookies)
	}
	for _, srv := range []string{a.srv.URL, b.srv.URL} {
		resp, err := browser.Get(srv + "/api/runs")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s/api/runs after both logins: %d, want 200", srv, resp.StatusCode)
		}
	}
}

func TestLoginForm(t *testing.T) {
	e := setup(t)
	for _, tc := range []struct {
		name, tok, origin string
		want              int
	}{
		{"right token", token, "", 303},
		{"right token, same origin", token, e.srv.URL, 303},
		{"wrong token", "nope", "", 401},
		{"other origin", token, "http://evil.example", 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", e.srv.URL+"/login", strings.NewReader(url.Values{"token": {tc.tok}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			resp, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
			}
			if got := len(resp.Cookies()) > 0; got != (tc.want == 303) {
				t.Fatalf("cookie set = %v", got)
			}
		})
	}
}

func TestCheckListen(t *testing.T) {
	for _, tc := range []struct {
		addr          string
		tls, insecure bool
		ok            bool
	}{
		{"127.0.0.1:8233", false, false, true},
		{"localhost:8233", false, false, true},
		{"[::1]:8233", false, false, true},
		{":8233", false, false, false},
		{"0.0.0.0:8233", false, false, false},
		{"10.0.0.5:8233", false, false, false},
		{"10.0.0.5:8233", true, false, true},
		{":8233", false, true, true},
		{"nonsense", false, false, false},
	} {
		err := console.CheckListen(tc.addr, tc.tls, tc.insecure)
		if (err == nil) != tc.ok {
			t.Errorf("CheckListen(%q, tls=%v, insecure=%v) = %v", tc.addr, tc.tls, tc.insecure, err)
		}
	}
}

func TestResolveToken(t *testing.T) {
	dir := t.TempDir()
	file := dir + "/tok"
	if err := writeFile(file, " from-file\n"); err != nil {
		t.Fatal(err)
	}
	empty := dir + "/empty"
	if err := writeFile(empty, "\n"); err != nil {
		t.Fatal(err)
	}
	if tok, gen, err := console.ResolveToken("from-env", file); err != nil || tok != "from-file" || gen {
		t.Fatalf("file first: %q %v %v", tok, gen, err)
	}
	if tok, gen, err := console.ResolveToken("from-env", ""); err != nil || tok != "from-env" || gen {
		t.Fatalf("env: %q %v %v", tok, gen, err)
	}
	a, gen, err := console.ResolveToken("", "")
	b, _, _ := console.ResolveToken("", "")
	if err != nil || !gen || len(a) < 32 || a == b {
		t.Fatalf("generated: %q %q %v %v", a, b, gen, err)
	}
	if _, _, err := console.ResolveToken("", empty); err == nil {
		t.Fatal("an empty token file must be an error")
	}
	if _, _, err := console.ResolveToken("", dir+"/missing"); err == nil {
		t.Fatal("a missing token file must be an error")
	}
}

func get(t *testing.T, u string, v any) {
	t.Helper()
	var raw json.RawMessage
	if code := getStatus(t, u, &raw); code != 200 {
		t.Fatalf("GET %s: %d %s", u, code, raw)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatal(err)
	}
}

// getStatus GETs u, decodes its JSON body into v, and returns its status.
func getStatus(t *testing.T, u string, v any) int {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %d, body: %v", u, resp.StatusCode, err)
	}
	return resp.StatusCode
}

type page struct {
	Runs []struct {
		RunID   string `json:"runId"`
		State   string `json:"state"`
		Profile string `json:"profile"`
	} `json:"runs"`
	Total, All, Offset int
	Ready              bool
	Profiles, Nodes    []string
	States             map[string]int
}

// TestRunsList fills the runs bucket with 10,000 records and pages,
// filters and searches them; a new record shows up in the list.
func TestRunsList(t *testing.T) {
	e := setup(t)
	// 10,000 writes take about 2 s, 15 under -race on a busy machine.
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	const n = 10000
	base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	states := []kv.RunState{kv.RunRunning, kv.RunState("succeeded"), kv.RunState("failed"), kv.RunStarting}
	var acks []jetstream.PubAckFuture
	for i := range n {
		rec := kv.RunRecord{
			RunID: fmt.Sprintf("run-%05d", i), State: states[i%4], Profile: []string{"claude", "codex"}[i%2],
			Node: fmt.Sprintf("node-%d", i%3), CreatedAt: base.Add(time.Duration(i) * time.Second),
			Labels: map[string]string{"team": []string{"a", "b", "c", "d", "e"}[i%5]},
		}
		b, err := msgpackEncode(rec)
		if err != nil {
			t.Fatal(err)
		}
		a, err := e.js.PublishAsync("$KV."+names.RunsBucket()+"."+rec.RunID, b)
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, a)
		if i%1000 == 999 { // a bounded window of acks in flight
			select {
			case <-e.js.PublishAsyncComplete():
			case <-ctx.Done():
				t.Fatalf("records not stored in time (%d of %d)", i+1, n)
			}
		}
	}
	for _, a := range acks {
		select {
		case err := <-a.Err():
			t.Fatal(err)
		default:
		}
	}
	var p page
	testenv.WaitFor(t, 20*time.Second, "the console's index to hold 10,000 runs", func() bool {
		get(t, e.srv.URL+"/api/runs", &p)
		return p.All == n
	})
	if len(p.Runs) != 50 || p.Runs[0].RunID != "run-09999" || p.Total != n {
		t.Fatalf("first page: %d runs, first %q, total %d", len(p.Runs), p.Runs[0].RunID, p.Total)
	}
	start := time.Now()
	get(t, e.srv.URL+"/api/runs?offset=9990&limit=50", &p)
	t.Logf("last page of 10,000 runs in %v", time.Since(start))
	if len(p.Runs) != 10 || p.Runs[9].RunID != "run-00000" {
		t.Fatalf("last page: %+v", p.Runs)
	}
	for _, tc := range []struct {
		query string
		total int
		first string
	}{
		{"state=failed", n / 4, "run-09998"},
		{"state=active", n / 2, "run-09999"},
		{"profile=codex", n / 2, "run-09999"},
		{"node=node-0", 3334, "run-09999"},
		{"label=team%3Da", n / 5, "run-09995"},
		{"label=team", n, "run-09999"},
		{"label=missing", 0, ""},
		{"q=0042", 11, "run-00429"},
		{"q=run-00042", 1, "run-00042"},
		{"state=failed&profile=claude&node=node-1", 833, "run-09994"},
	} {
		get(t, e.srv.URL+"/api/runs?"+tc.query, &p)
		first := ""
		if len(p.Runs) > 0 {
			first = p.Runs[0].RunID
		}
		if p.Total != tc.total || first != tc.first {
			t.Errorf("%s: total %d first %q, want %d %q", tc.query, p.Total, first, tc.total, tc.first)
		}
	}
	if strings.Join(p.Profiles, ",") != "claude,codex" || len(p.Nodes) != 3 {
		t.Errorf("filter choices: profiles %v nodes %v", p.Profiles, p.Nodes)
	}
	// Counts per state: of the runs the other filters match, whatever
	// the state chosen.
	for query, want := range map[string]map[string]int{
		"":                           {"running": n / 4, "succeeded": n / 4, "failed": n / 4, "starting": n / 4},
		"profile=codex":              {"succeeded": n / 4, "starting": n / 4},
		"profile=codex&state=failed": {"succeeded": n / 4, "starting": n / 4},
		"q=run-00042":                {"failed": 1},
	} {
		var p page
		get(t, e.srv.URL+"/api/runs?"+query, &p)
		if !maps.Equal(p.States, want) {
			t.Errorf("%q: counts per state %v, want %v", query, p.States, want)
		}
	}

	// Live: the list's event stream says when the index changed.
	resp := openStream(t, e.srv.URL+"/api/runs/live", "")
	defer resp.Body.Close()
	if _, err := e.res.Runs.Put(ctx, "run-new", mustEncode(t, kv.RunRecord{RunID: "run-new", State: kv.RunStarting, CreatedAt: base.Add(24 * time.Hour)})); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	changed := false
	for !changed && sc.Scan() {
		changed = sc.Text() == "event: changed"
	}
	if !changed {
		t.Fatalf("no change event on the list's stream: %v", sc.Err())
	}
	get(t, e.srv.URL+"/api/runs", &p)
	if p.Runs[0].RunID != "run-new" || p.All != n+1 {
		t.Fatalf("after a new record: first %q, %d runs", p.Runs[0].RunID, p.All)
	}
	// A deleted record leaves the list.
	if err := e.res.Runs.Delete(ctx, "run-new"); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 5*time.Second, "the deleted record to leave the list", func() bool {
		get(t, e.srv.URL+"/api/runs", &p)
		return p.All == n
	})
}

// openStream opens an event stream that the test's reads may wait on for
// at most 30 s.
func openStream(t *testing.T, u, lastID string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, b)
	}
	return resp
}

type sseEvent struct {
	id, name string
	data     string
}

// readEvents reads server-sent events until n data events or the end.
func readEvents(t *testing.T, r io.Reader, n int) (evs []sseEvent, end string) {
	t.Helper()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var cur sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data == "" && cur.name == "" {
				continue
			}
			if cur.name == "watching" || cur.name == "workers" { // the stream's start, a notice: not its end
				cur = sseEvent{}
				continue
			}
			if cur.name != "" {
				return evs, cur.name
			}
			evs = append(evs, cur)
			cur = sseEvent{}
			if len(evs) == n {
				return evs, ""
			}
		case strings.HasPrefix(line, "id: "):
			cur.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.name = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.data = line[6:]
		}
	}
	return evs, ""
}

type wire struct {
	Seq    uint64 `json:"seq"`
	Kind   string `json:"kind"`
	Offset int64  `json:"offset"`
	Data   string `json:"data"`
}

// TestEventsResume streams a run's chain: the first connection reads part
// of it, a second one resumes from its Last-Event-ID while the run goes on,
// and the two together hold every message exactly once, in order; a
// chunked line arrives whole; the terminal status ends the stream.
func TestEventsResume(t *testing.T) {
	e := setup(t)
	ctx := ctxT(t)
	nc := e.js.Conn()
	publish := func(kind protocol.RunKind, data string, hdr nats.Header) {
		t.Helper()
		m := &nats.Msg{Subject: names.IngestSubject("r1", kind), Data: []byte(data), Header: hdr}
		if _, err := e.js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	// Another run's messages interleave and must not show.
	other := &nats.Msg{Subject: names.IngestSubject("r2", protocol.KindEvents), Data: []byte(`{"other":true}`)}
	publish(protocol.KindStatus, string(protocol.Status{Status: protocol.StatusStarted, RunID: "r1", Worker: "w1", Epoch: 1}.Marshal()), nil)
	var want []string
	for i := range 20 {
		line := fmt.Sprintf(`{"type":"assistant","i":%d}`, i)
		publish(protocol.KindEvents, line, nats.Header{protocol.HeaderOffset: {strconv.Itoa(i * 10)}})
		want = append(want, line)
		if _, err := e.js.PublishMsg(ctx, other); err != nil {
			t.Fatal(err)
		}
	}
	_ = nc

	resp := openStream(t, e.srv.URL+"/api/runs/r1/events", "")
	first, end := readEvents(t, resp.Body, 11) // the status and 10 lines
	resp.Body.Close()
	if end != "" || len(first) != 11 {
		t.Fatalf("first connection: %d events, end %q", len(first), end)
	}
	// More happens while the browser is away: a raw line, a chunked line,
	// a hand-off.
	publish(protocol.KindRaw, "progress: 50%", nil)
	publish(protocol.KindEvents, `{"type":"big",`, nats.Header{protocol.HeaderChunk: {"1/2"}})
	publish(protocol.KindEvents, `"x":1}`, nats.Header{protocol.HeaderChunk: {"2/2"}})
	publish(protocol.KindStatus, string(protocol.Status{Status: protocol.StatusHandoff, RunID: "r1", Worker: "w1", Epoch: 1}.Marshal()), nil)
	publish(protocol.KindStatus, string(protocol.Status{Status: protocol.StatusAttached, RunID: "r1", Worker: "w2", Epoch: 2}.Marshal()), nil)
	want = append(want, "progress: 50%", `{"type":"big","x":1}`)
	publish(protocol.KindStatus, string(protocol.Status{Status: protocol.StatusSucceeded, RunID: "r1", Worker: "w2", Epoch: 2}.Marshal()), nil)

	resp = openStream(t, e.srv.URL+"/api/runs/r1/events", first[len(first)-1].id)
	rest, end := readEvents(t, resp.Body, 1000)
	resp.Body.Close()
	if end != "end" {
		t.Fatalf("second connection ended with %q, want the end event", end)
	}
	var got []string
	var statuses []string
	var last uint64
	for _, ev := range append(first, rest...) {
		var w wire
		if err := json.Unmarshal([]byte(ev.data), &w); err != nil {
			t.Fatalf("event %q: %v", ev.data, err)
		}
		if w.Seq <= last || ev.id != strconv.FormatUint(w.Seq, 10) {
			t.Fatalf("event seq %d (id %s) after %d", w.Seq, ev.id, last)
		}
		last = w.Seq
		if w.Kind == "status" {
			st, err := protocol.ParseStatus([]byte(w.Data))
			if err != nil {
				t.Fatal(err)
			}
			statuses = append(statuses, fmt.Sprintf("%s/%s/%d", st.Status, st.Worker, st.Epoch))
			continue
		}
		got = append(got, w.Data)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if s := strings.Join(statuses, " "); s != "started/w1/1 handoff/w1/1 attached/w2/2 succeeded/w2/2" {
		t.Fatalf("statuses %s", s)
	}
	// A bad resume point is refused, not streamed from the start.
	req, _ := http.NewRequest("GET", e.srv.URL+"/api/runs/r1/events?after=x", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	r2, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != 400 {
		t.Fatalf("after=x: %d", r2.StatusCode)
	}
}

func post(t *testing.T, u, body string) (int, string) { t.Helper(); return call(t, "POST", u, body) }

// call sends a request with the console's token, and headers given as
// name, value pairs; it returns the answer's status and body.
func call(t *testing.T, method, u, body string, header ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestInput sends the input box's text to a run through a real worker:
// it reaches the agent's stdin once (the chain's .input message and the
// agent's echo); an unknown run, a run that takes no input, an empty or
// oversized input, and no worker at all each get their own answer.
func TestInput(t *testing.T) {
	e := setup(t)
	if code, body := post(t, e.srv.URL+"/api/runs/r1/input", "hello"); code != 503 {
		t.Fatalf("input with no worker: %d %s", code, body)
	}
	cfg := config.Default()
	cfg.Profiles["chat"] = config.Profile{Command: []string{"/bin/sh", "-c", `while read -r l; do echo "echo:$l"; done`},
		Timeout: time.Minute, Stdin: config.StdinStream}
	cfg.Profiles["once"] = config.Profile{Command: []string{"/bin/sh", "-c", "sleep 30"}, Timeout: time.Minute}
	c := e.startWorker(t, cfg)
	for _, j := range []protocol.Job{{RunID: "chat-1", Profile: "chat"}, {RunID: "once-1", Profile: "once"}} {
		if err := c.Submit(ctxT(t), j); err != nil {
			t.Fatal(err)
		}
	}
	testenv.WaitFor(t, 20*time.Second, "both runs to be running", func() bool {
		for _, id := range []string{"chat-1", "once-1"} {
			if rec, err := c.Run(ctxT(t), id); err != nil || rec.State != "running" {
				return false
			}
		}
		return true
	})
	if code, body := post(t, e.srv.URL+"/api/runs/chat-1/input", "hello"); code != 200 || !strings.Contains(body, `"seq":`) {
		t.Fatalf("input: %d %s", code, body)
	}
	var echoed, input bool
	errSeen := errors.New("seen")
	wctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err := c.Watch(wctx, "chat-1", func(ev client.Event) error {
		echoed = echoed || strings.Contains(string(ev.Data), "echo:hello")
		input = input || ev.Kind == protocol.KindInput && strings.Contains(string(ev.Data), "hello")
		if echoed && input {
			return errSeen
		}
		return nil
	})
	if !errors.Is(err, errSeen) {
		t.Fatalf("the chain within 20s: input message %v, agent's echo %v (%v)", input, echoed, err)
	}
	for _, tc := range []struct {
		path, body string
		want       int
	}{
		{"/api/runs/nosuchrun/input", "x", 404},
		{"/api/runs/once-1/input", "x", 409},
		{"/api/runs/chat-1/input", "", 400},
		{"/api/runs/chat-1/input", strings.Repeat("x", 64<<10+1), 400},
	} {
		if code, body := post(t, e.srv.URL+tc.path, tc.body); code != tc.want {
			t.Errorf("POST %s (%d bytes): %d %s, want %d", tc.path, len(tc.body), code, body, tc.want)
		}
	}
}

func TestTokenEndpoint(t *testing.T) {
	issued := map[string]bool{}
	issue := func(runID string, ttl time.Duration, input bool) (string, error) {
		issued[fmt.Sprintf("%s/%v/%v", runID, ttl, input)] = true
		return "jwt-for-" + runID, nil
	}
	e := setup(t, console.WithTokenIssuer(issue))
	ro := setup(t, console.WithTokenIssuer(issue), console.WithReadOnly())
	none := setup(t)
	for _, env := range []env{e, ro} {
		if _, err := env.res.Runs.Put(ctxT(t), "r1", mustEncode(t, kv.RunRecord{RunID: "r1", State: kv.RunRunning})); err != nil {
			t.Fatal(err)
		}
	}
	var out struct{ JWT string }
	get(t, e.srv.URL+"/api/runs/r1/token?input=1&ttl=5m", &out)
	if out.JWT != "jwt-for-r1" || !issued["r1/5m0s/true"] {
		t.Fatalf("token %q, issued %v", out.JWT, issued)
	}
	get(t, ro.srv.URL+"/api/runs/r1/token", &out)
	if !issued["r1/15m0s/false"] {
		t.Fatalf("read-only read token: issued %v", issued)
	}
	for _, tc := range []struct {
		srv  *httptest.Server
		path string
		want int
	}{
		{ro.srv, "/api/runs/r1/token?input=1", 403},
		{none.srv, "/api/runs/r1/token", 404},
		{e.srv, "/api/runs/r1/token?ttl=25h", 400},
		{e.srv, "/api/runs/r1/token?ttl=-1s", 400},
		{e.srv, "/api/runs/r1/token?ttl=soon", 400},
		// No token for a run that has no record (F1: the token for run
		// baton_worker was handed out, existing or not).
		{e.srv, "/api/runs/nosuchrun/token", 404},
		{e.srv, "/api/runs/baton_worker/token", 404},
		{ro.srv, "/api/runs/nosuchrun/token", 404},
	} {
		req, _ := http.NewRequest("GET", tc.srv.URL+tc.path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d, want %d", tc.path, resp.StatusCode, tc.want)
		}
	}
	for k := range issued {
		if strings.HasPrefix(k, "nosuchrun/") || strings.HasPrefix(k, "baton_worker/") {
			t.Errorf("a token was issued for a run that has no record: %s", k)
		}
	}
}

// TestOutputDownload serves an output a run's terminal status lists from
// the outputs object store.
func TestOutputDownload(t *testing.T) {
	e := setup(t)
	obs, err := e.js.ObjectStore(ctxT(t), names.OutputsBucket()) // provisioned with the rest
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutString(ctxT(t), "r1/diff.patch", "--- a\n+++ b\n"); err != nil {
		t.Fatal(err)
	}
	// The page links the names a terminal status lists, "<runId>/...".
	for _, path := range []string{"/api/runs/r1/outputs/diff.patch", "/api/runs/r1/outputs/r1/diff.patch"} {
		req, _ := http.NewRequest("GET", e.srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "--- a\n+++ b\n" || !strings.Contains(resp.Header.Get("Content-Disposition"), `filename="diff.patch"`) {
			t.Fatalf("download %s: %d %q %v", path, resp.StatusCode, b, resp.Header)
		}
	}
	// A file, named by its path's digest, downloads under its path's last
	// segment.
	file := outputs.FileName("r1", "out/report.md")
	if _, err := obs.Put(ctxT(t), jetstream.ObjectMeta{Name: file, Metadata: map[string]string{"baton-kind": outputs.KindFile, "baton-path": "out/report.md"}},
		strings.NewReader("# report\n")); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", e.srv.URL+"/api/runs/r1/outputs/"+file, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "# report\n" || !strings.Contains(resp.Header.Get("Content-Disposition"), `filename="report.md"`) {
		t.Fatalf("download %s: %d %q %v", file, resp.StatusCode, b, resp.Header)
	}
	for path, want := range map[string]int{"/api/runs/r1/outputs/missing": 404, "/api/runs/r2/outputs/diff.patch": 404, "/api/runs/r1/outputs/../r2/x": 400} {
		req, _ := http.NewRequest("GET", e.srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want && !(want == 400 && resp.StatusCode >= 300) {
			t.Errorf("%s: %d, want %d", path, resp.StatusCode, want)
		}
	}
}

// TestNATSDown: while the console's connection to NATS is down, the runs
// list and the calls that need NATS say "NATS cannot be reached" (not
// "reading run records" or a timeout), the list's live stream tells the
// page at once, and the list's error clears once NATS is back.
func TestNATSDown(t *testing.T) {
	dir := t.TempDir()
	s := testenv.RunServerIn(t, dir, -1)
	port := s.Addr().(*net.TCPAddr).Port
	_, js := testenv.Connect(t, s)
	if _, err := provision.Ensure(ctxT(t), js, names, provision.Options{}); err != nil {
		t.Fatal(err)
	}
	c, err := console.New(t.Context(), js, names, console.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	type list struct {
		Ready bool
		Error string
	}
	runs := func() (p list) { get(t, srv.URL+"/api/runs", &p); return p }
	testenv.WaitFor(t, 10*time.Second, "the run index ready", func() bool { p := runs(); return p.Ready && p.Error == "" })
	live := openStream(t, srv.URL+"/api/runs/live", "")
	defer live.Body.Close()
	watching := openStream(t, srv.URL+"/api/runs/r1/events", "")
	defer watching.Body.Close()

	s.Shutdown()
	s.WaitForShutdown()
	if _, end := readEvents(t, live.Body, 1); end != "changed" {
		t.Fatal("the runs' live stream told nothing within 30 s of NATS going down")
	}
	if p := runs(); !strings.HasPrefix(p.Error, "NATS cannot be reached") {
		t.Fatalf("runs list error %q, want NATS cannot be reached", p.Error)
	}
	req, _ := http.NewRequest("GET", srv.URL+"/api/dlq", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "NATS cannot be reached") {
		t.Fatalf("dead letters while NATS is down: %d %s", resp.StatusCode, b)
	}

	// A run's event stream open when NATS goes away ends saying so, one
	// opened while NATS is down says so at once (the page reconnects
	// after either), and once NATS is back one says it is on.
	if _, end := readEvents(t, watching.Body, 1); end != "failure" {
		t.Fatalf("a run's event stream open as NATS went down ended %q, want a failure", end)
	}
	events := openStream(t, srv.URL+"/api/runs/r1/events", "")
	defer events.Body.Close()
	if _, end := readEvents(t, events.Body, 1); end != "failure" {
		t.Fatalf("a run's event stream while NATS is down ended %q, want a failure", end)
	}

	testenv.RunServerIn(t, dir, port)
	testenv.WaitFor(t, 20*time.Second, "the runs list's error to clear once NATS is back", func() bool { return runs().Error == "" })
	again := openStream(t, srv.URL+"/api/runs/r1/events", "")
	defer again.Body.Close()
	first, err := bufio.NewReader(again.Body).ReadString('\n')
	if err != nil || first != "event: watching\n" {
		t.Fatalf("a run's event stream once NATS is back starts %q (%v), want the watching event", first, err)
	}
}

// TestEventsSayWhenNoWorkerAnswers: a run's event stream tells the page
// when no worker answers its reads (none runs, or the only one crashed),
// and when one does again, where it went silent.
func TestEventsSayWhenNoWorkerAnswers(t *testing.T) {
	e := setup(t)
	if _, err := e.js.Publish(ctxT(t), names.IngestSubject("r1", protocol.KindStatus),
		protocol.Status{Status: protocol.StatusStarted, RunID: "r1", Worker: "w1", Epoch: 1}.Marshal()); err != nil {
		t.Fatal(err)
	}
	resp := openStream(t, e.srv.URL+"/api/runs/r1/events", "")
	defer resp.Body.Close()
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	// await reads the stream until an event named name whose data holds
	// data.
	await := func(what, name, data string) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		event := ""
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the stream ended before %s", what)
				}
				if e, ok := strings.CutPrefix(l, "event: "); ok {
					event = e
				} else if d, ok := strings.CutPrefix(l, "data: "); ok && event == name && strings.Contains(d, data) {
					return
				} else if l == "" {
					event = ""
				}
			case <-deadline:
				t.Fatalf("no %s within 20 s", what)
			}
		}
	}
	await("started status", "", `"kind":"status"`)
	if err := e.stopRelay(); err != nil {
		t.Fatal(err)
	}
	await("word that no worker answers", "workers", `{"answering":false}`)
	serveRelay(t, e.nc)
	await("word that a worker answers again", "workers", `{"answering":true}`)
}

// TestRunOfARejectedJob: the page of a run whose job the DLQ took says
// why (the API's 404 carries the rejection), where it waited for a record
// for ever.
func TestRunOfARejectedJob(t *testing.T) {
	e := setup(t)
	c := e.startWorker(t, config.Default())
	if err := c.Submit(ctxT(t), protocol.Job{RunID: "bad-1", Profile: "nosuch"}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 20*time.Second, "the job in the DLQ", func() bool {
		d, err := c.DLQ(ctxT(t), 10)
		return err == nil && len(d) == 1
	})
	var body struct {
		Rejected bool
		Error    string
	}
	code := getStatus(t, e.srv.URL+"/api/runs/bad-1", &body)
	if code != http.StatusNotFound || !body.Rejected || !strings.HasPrefix(body.Error, "run bad-1 was rejected (unknown_profile): ") {
		t.Fatalf("GET api/runs/bad-1: %d %+v, want 404 saying it was rejected", code, body)
	}
	var plain map[string]any
	if code := getStatus(t, e.srv.URL+"/api/runs/never-submitted", &plain); code != http.StatusNotFound || plain["rejected"] != nil {
		t.Fatalf("GET api/runs/never-submitted: %d %v, want a plain 404", code, plain)
	}
}
