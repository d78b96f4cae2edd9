package escape

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox"
	"github.com/batonhq/baton/test/internal/e2e"
)

// TestEgressOnTheChain: a run whose agent makes, round after round, an
// allowed GET, a refused CONNECT and an allowed tunnel through its
// sandbox's egress proxy and a refused DNS query, handed off meanwhile
// twice (SIGTERM of its worker, then SIGKILL of the next, whose lease a
// third worker takes), has each connection once on its egress subject: one message for each
// egress record of the journal, at the record's offset, after the agent's
// line that announced the connection, with its host, port, method,
// verdict and bytes. Every other line is on the chain once too, and the
// agent's look-alike record, without the run's nonce, is one of them.
func TestEgressOnTheChain(t *testing.T) {
	const rounds = 30
	w := newEgressWorld(t)
	js, names, dir, host, name := w.js, w.names, w.dir, w.host, egressName
	w1 := w.worker()
	id := w.submit(rounds, 250*time.Millisecond)
	journalPath := filepath.Join(dir, "runs", id, "journal.ndjson")
	reached := func(round int) func() bool {
		mark := fmt.Sprintf(`{"round":%d,"step":"get"}`, round)
		return func() bool { b, _ := os.ReadFile(journalPath); return bytes.Contains(b, []byte(mark)) }
	}
	lastStatus := func() protocol.Status {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		stream, err := js.Stream(ctx, names.EventsStream())
		if err != nil {
			return protocol.Status{}
		}
		m, err := stream.GetLastMsgForSubject(ctx, names.StatusSubject(id))
		if err != nil {
			return protocol.Status{}
		}
		st, _ := protocol.ParseStatus(m.Data)
		return st
	}

	// SIGTERM: the holder hands the run off to a second worker.
	testenv.WaitFor(t, time.Minute, "the agent to reach round 3 in the journal", reached(3))
	w2 := w.worker()
	if !w1.Stop(syscall.SIGTERM, 30*time.Second) {
		t.Fatal("worker 1 did not exit within 30s of SIGTERM")
	}
	testenv.WaitFor(t, 30*time.Second, "worker 2 to attach the run after the hand-off", func() bool { return lastStatus().Status == protocol.StatusAttached })
	// SIGKILL: the second worker dies holding the run; a third takes its
	// lease when it expires.
	testenv.WaitFor(t, time.Minute, "the agent to reach round 10 in the journal", reached(10))
	if reached(rounds)() {
		t.Fatalf("the run reached its last round before the kill: make it longer")
	}
	w.worker()
	w2.Stop(syscall.SIGKILL, 0)

	msgs := e2e.WaitChain(t, js, names, id, 2*time.Minute)
	nonce, err := sandbox.ReadNonce(journal.Dir(filepath.Join(dir, "runs", id)))
	if err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile(journalPath)
	if err != nil {
		t.Fatal(err)
	}
	// The journal's lines by their end offset, the sentinel aside.
	lineAt := map[int64][]byte{}
	var ends []int64
	for start := 0; start < len(body); {
		i := bytes.IndexByte(body[start:], '\n')
		if i < 0 {
			t.Fatalf("journal ends with a partial line at %d", start)
		}
		line, end := body[start:start+i], int64(start+i+1)
		start = int(end)
		if _, ok := journal.ParseSentinel(line, nonce); ok {
			break
		}
		lineAt[end] = line
		ends = append(ends, end)
	}

	// Every line once, in the journal's order, egress records on the
	// egress subject and nowhere else.
	type step struct {
		Round    int    `json:"round"`
		Step     string `json:"step"`
		Sent     int64  `json:"sent"`
		Received int64  `json:"received"`
		Error    string `json:"error"`
	}
	var published []int64
	var statuses []string
	var egress []journal.Egress
	var announced = map[string]int{}
	var tunnelled []step
	seen := map[string]bool{}
	forged := 0
	for _, m := range msgs {
		h := m.Headers()
		if mid := h.Get(nats.MsgIdHdr); mid == "" || seen[mid] {
			t.Fatalf("message on %s has a missing or repeated Msg-Id %q", m.Subject(), mid)
		} else {
			seen[mid] = true
		}
		_, kind, ok := names.ParseRunSubject(m.Subject())
		if !ok {
			t.Fatalf("message on %s", m.Subject())
		}
		if kind == protocol.KindStatus {
			st, _ := protocol.ParseStatus(m.Data())
			statuses = append(statuses, string(st.Status))
			continue
		}
		off, _ := strconv.ParseInt(h.Get(protocol.HeaderOffset), 10, 64)
		line, ok := lineAt[off]
		if !ok {
			t.Fatalf("%s message at offset %d: no journal line ends there", kind, off)
		}
		published = append(published, off)
		rec, isRecord := journal.ParseEgressRecord(line, nonce)
		if isRecord != (kind == protocol.KindEgress) {
			t.Fatalf("journal line %q at %d is on %s", line, off, m.Subject())
		}
		if isRecord {
			if !bytes.Equal(m.Data(), rec.Body()) {
				t.Fatalf("egress message %s for the journal's record %s", m.Data(), rec.Body())
			}
			e := rec.Egress
			// Each connection comes after the agent's line announcing it.
			key := egressKind(e)
			if n := len(egressOf(egress, key)); n >= announced[key] {
				t.Fatalf("egress message %d for %s %s:%d comes before the agent's line announcing it (%d announced)", len(egress)+1, e.Method, e.Host, e.Port, announced[key])
			}
			egress = append(egress, e)
			continue
		}
		if !bytes.Equal(m.Data(), line) {
			t.Fatalf("%s message %q at %d, journal line %q", kind, m.Data(), off, line)
		}
		if bytes.HasPrefix(line, []byte(`{"__egress":`)) {
			forged++
			if kind != protocol.KindEvents {
				t.Fatalf("the agent's look-alike record went to %s", m.Subject())
			}
			continue
		}
		var st step
		if err := json.Unmarshal(line, &st); err != nil || st.Round == 0 {
			t.Fatalf("agent line %q", line)
		}
		if st.Error != "" {
			t.Fatalf("the agent's round %d, step %s failed: %s", st.Round, st.Step, st.Error)
		}
		announced[st.Step]++
		if st.Step == "tunnelled" {
			tunnelled = append(tunnelled, st)
		}
	}
	if fmt.Sprint(published) != fmt.Sprint(ends) {
		t.Fatalf("the chain has the journal lines ending at\n%v\nthe journal has\n%v", published, ends)
	}
	if forged != 1 {
		t.Fatalf("the agent's look-alike record is on the chain %d times, want once", forged)
	}
	kinds := strings.Join(statuses, ",")
	if !strings.HasSuffix(kinds, ",succeeded") || !strings.Contains(kinds, "handoff,attached") || strings.Count(kinds, "attached") < 2 {
		t.Fatalf("statuses %s: want a hand-off, a second attach (after the kill) and success", kinds)
	}

	// What each connection was.
	gets, refusals, tunnels, queries := egressOf(egress, "get"), egressOf(egress, "refused"), egressOf(egress, "tunnel"), egressOf(egress, "dns")
	if len(egress) != 4*rounds || len(gets) != rounds || len(refusals) != rounds || len(tunnels) != rounds || len(queries) != rounds || len(tunnelled) != rounds {
		t.Fatalf("%d egress messages (%d GET, %d refused, %d tunnels, %d DNS; %d tunnels the agent reported), want %d of each",
			len(egress), len(gets), len(refusals), len(tunnels), len(queries), len(tunnelled), rounds)
	}
	for i := range rounds {
		g, r, tu, q, said := gets[i], refusals[i], tunnels[i], queries[i], tunnelled[i]
		if g.Host != name || int(g.Port) != host.Port || !g.Allowed || g.Reason != "" || g.BytesOut == 0 || g.BytesIn == 0 {
			t.Errorf("round %d: GET %+v", i+1, g)
		}
		if r.Port != 443 || r.Allowed || !strings.Contains(r.Reason, "not on the allowlist") || r.BytesOut != 0 || r.BytesIn != 0 {
			t.Errorf("round %d: refusal %+v", i+1, r)
		}
		if tu.Host != host.Addr.String() || int(tu.Port) != host.Port || !tu.Allowed || tu.BytesOut != said.Sent || tu.BytesIn != said.Received {
			t.Errorf("round %d: tunnel %+v, the agent sent %d bytes and received %d", i+1, tu, said.Sent, said.Received)
		}
		if q.Host != "exfil.example" || q.Port != 53 || q.Allowed || !strings.Contains(q.Reason, "not on the allowlist") {
			t.Errorf("round %d: DNS refusal %+v", i+1, q)
		}
		for _, e := range []journal.Egress{g, r, tu, q} {
			if e.Secret != "" || e.Start.IsZero() || time.Since(e.Start) > 5*time.Minute || e.DurationMs < 0 {
				t.Errorf("round %d: %+v: a secret, or no start time", i+1, e)
			}
		}
	}
	t.Logf("%d messages: %d egress, statuses %s", len(msgs), len(egress), kinds)
}

// egressName is the test host's name on the egress profile's allowlist.
const egressName = "th.egress.test"

// egressWorld is a NATS server, a test host and a worker configuration
// whose profile "egress" runs the escape agent's egress rounds with the
// test host on its allowlist (by name and by CIDR).
type egressWorld struct {
	t        *testing.T
	bin, cfg string
	s        *server.Server
	js       jetstream.JetStream
	names    protocol.Names
	dir      string
	host     *testenv.TestHost
}

func newEgressWorld(t *testing.T) *egressWorld {
	escapeNeeds(t, "egress tests")
	w := &egressWorld{t: t, bin: testenv.BatonBinary(t), names: protocol.MustNames(""), dir: testenv.StateDir(t)}
	agent := escapeBuildAgent(t)
	w.host = testenv.NewTestHost(t, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(rw, "hello from the test host")
	}))
	w.s = testenv.RunServer(t)
	_, w.js = testenv.Connect(t, w.s)
	w.cfg = filepath.Join(t.TempDir(), "baton.yaml")
	yaml := fmt.Sprintf(`leaseTTL: 2s
profiles:
  egress:
    command: [%q]
    allowArgs: true
    timeout: 2m
    mounts: [{source: %q}]
    network: {allow: [%s, %q], hosts: {%s: %q}}
`, agent, filepath.Dir(agent), egressName, w.host.Prefix, egressName, w.host.Addr)
	if err := os.WriteFile(w.cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return w
}

// worker starts a worker process of the world's node, ready.
func (w *egressWorld) worker() *testenv.Proc {
	_, p := e2e.StartWorkerProc(w.t, w.bin, w.s.ClientURL(), w.dir, "egress", "--config", w.cfg, "--grace", "20s")
	return p
}

// submit submits a run of rounds egress rounds, pause after each, then
// the agent's further args, and returns its runId.
func (w *egressWorld) submit(rounds int, pause time.Duration, args ...string) string {
	id := "egress-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	e2e.SubmitJob(w.t, w.js, w.names, map[string]any{"runId": id, "profile": "egress", "args": append([]string{"egress",
		"--test-name", egressName, "--test-addr", w.host.Addr.String(), "--test-port", strconv.Itoa(w.host.Port),
		"--rounds", strconv.Itoa(rounds), "--pause", pause.String()}, args...)})
	return id
}

// TestEgressCapped: an agent that opens connection after connection gets
// 1,000 egress messages on its chain, then one note that further egress
// is not recorded, and nothing more; the proxy goes on refusing.
func TestEgressCapped(t *testing.T) {
	const flood = 1100
	w := newEgressWorld(t)
	w.worker()
	id := w.submit(0, 0, "--flood", strconv.Itoa(flood))
	var egress []journal.Egress
	var flooded string
	for _, m := range e2e.WaitChain(t, w.js, w.names, id, 2*time.Minute) {
		_, kind, _ := w.names.ParseRunSubject(m.Subject())
		switch {
		case kind == protocol.KindEgress:
			var e journal.Egress
			if err := json.Unmarshal(m.Data(), &e); err != nil {
				t.Fatalf("egress message %q: %v", m.Data(), err)
			}
			egress = append(egress, e)
		case bytes.Contains(m.Data(), []byte(`"step":"flooded"`)):
			flooded = string(m.Data())
		case kind == protocol.KindStatus:
			if st, _ := protocol.ParseStatus(m.Data()); st.Status.Terminal() && st.Status != protocol.StatusSucceeded {
				t.Fatalf("run ended %+v", st)
			}
		}
	}
	if want := fmt.Sprintf(`{"refused":%d,"step":"flooded"}`, flood); flooded != want {
		t.Fatalf("the agent said %q, want %s", flooded, want)
	}
	if len(egress) != 1001 {
		t.Fatalf("%d egress messages, want 1,000 and the note", len(egress))
	}
	for i, e := range egress[:1000] {
		if e.Host != "flood.example" || e.Allowed || e.Note != "" {
			t.Fatalf("egress message %d: %+v", i+1, e)
		}
	}
	if last := egress[1000]; last != (journal.Egress{Note: journal.EgressNoteLimit}) {
		t.Fatalf("last egress message %+v, want only the note %q", last, journal.EgressNoteLimit)
	}
}

// egressKind names which of the test agent's connections e is, as the
// step of the agent's line announcing it.
func egressKind(e journal.Egress) string {
	switch {
	case e.Method == "GET":
		return "get"
	case e.Method == "CONNECT" && e.Host == "example.com":
		return "refused"
	case e.Method == "CONNECT":
		return "tunnel"
	case e.Method == "DNS":
		return "dns"
	}
	return e.Method
}

// egressOf picks the egress of one kind (egressKind).
func egressOf(all []journal.Egress, kind string) []journal.Egress {
	var out []journal.Egress
	for _, e := range all {
		if egressKind(e) == kind {
			out = append(out, e)
		}
	}
	return out
}
