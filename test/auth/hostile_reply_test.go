package auth

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/runtoken"
	"github.com/batonhq/baton/test/internal/e2e"
	"github.com/batonhq/baton/worker"
)

// TestHostileReplies is finding F0's class, "no answer carries the
// answerer's rights": every endpoint of the worker's micro service that a
// `client`, the `console` or a run token can reach gets requests whose
// reply subject is somewhere an answer would act with the worker's rights
// (the finding's reproduction: as client, a cancel of a missing run with
// the reply $JS.API.STREAM.DELETE.BATON_EVENTS deleted every run's
// history), about a running run, an ended one and a missing one. An
// observer that sees every subject finds nothing published there; the
// streams, records, input and leases are as they were; each request is
// counted as refused; and the runs, and a run started afterwards, still
// work.
//
// "shipped" runs deploy/nats-browser.conf as shipped (client, console,
// run tokens over WebSocket, and the worker with its service user
// worker-svc, so the server refuses a reflected answer too); "no-auth"
// runs an embedded server without users, where the worker's own check
// (protocol.ReplyAllowed) is all that stands.
func TestHostileReplies(t *testing.T) {
	bin := testenv.BatonBinary(t)
	t.Run("shipped", func(t *testing.T) {
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
			// Ports, and a test-only observer that sees everything.
			for _, r := range [][2]string{
				{`listen: "127.0.0.1:9222"`, fmt.Sprintf(`listen: "127.0.0.1:%d"`, wsPort)},
				{"  users = [\n", "  users = [\n    {user: observer, password: o-secret, permissions: {publish: {deny: [\">\"]}, subscribe: {allow: [\">\"]}}}\n"},
				{"auth_users: [", "auth_users: [observer, "},
			} {
				edited := strings.Replace(conf, r[0], r[1], 1)
				if edited == conf {
					t.Fatalf("deploy/nats-browser.conf no longer has %q, which this test substitutes", r[0])
				}
				conf = edited
			}
			return conf
		})
		s := testenv.RunShipped(t, opts)
		url := func(user, p string) string {
			return fmt.Sprintf("nats://%s:%s@%s", user, p, strings.TrimPrefix(s.ClientURL(), "nats://"))
		}
		wsURL := fmt.Sprintf("ws://127.0.0.1:%d", wsPort)
		h := startHostile(t, bin, url("observer", "o-secret"), url("worker", pw["worker"]), "--service-nats", url("worker-svc", pw["worker-svc"]))
		clientNC := h.connect(url("client", pw["client"]))
		consoleNC := h.connect(url("console", pw["console"]))
		iss, err := runtoken.NewIssuer(seed, h.names)
		if err != nil {
			t.Fatal(err)
		}
		if err := iss.Serve(t.Context(), consoleNC); err != nil {
			t.Fatal(err)
		}
		token := func(run string) *nats.Conn {
			tok, err := iss.Issue(run, 5*time.Minute, true)
			if err != nil {
				t.Fatal(err)
			}
			return h.connect(wsURL, nats.Token(tok), nats.CustomInboxPrefix(runtoken.InboxPrefix(run)))
		}
		h.setUp(clientNC)

		runs := []string{hostileVictim, hostileDone, hostileMissing}
		var reqs []hostileRequest
		for _, run := range runs {
			for _, ep := range []string{"cancel", "input", "interrupt"} {
				reqs = append(reqs, h.requests("client", clientNC, ep, run, true)...)
				reqs = append(reqs, h.requests("console", consoleNC, ep, run, true)...)
			}
		}
		reqs = append(reqs, h.requests("console", consoleNC, "status", "", true)...)
		// micro's own verbs are not guarded in process: their answers are
		// refused by the server, as worker-svc may publish only into
		// inboxes (PING and STATS the console may not even send).
		for _, verb := range []string{"$SRV.INFO." + protocol.WorkerService, "$SRV.PING", "$SRV.STATS"} {
			reqs = append(reqs, h.requests("console", consoleNC, verb, hostileVictim, false)...)
		}
		// An input token, for a run that exists and for one that does not.
		reqs = append(reqs, h.requests("token", token(hostileVictim), "input", hostileVictim, true)...)
		reqs = append(reqs, h.requests("token", token(hostileMissing), "input", hostileMissing, true)...)
		h.attack(reqs, clientNC, consoleNC)
		// The server refused the service user's reflected INFO answer. The
		// worker hears of it asynchronously (the server's -ERR, the
		// client's error handler, the log), not before the answers attack
		// waited for: wait, bounded, for the line.
		const refusedInfo = `Permissions Violation for Publish to \"$JS.API.STREAM.DELETE.BATON_EVENTS\"`
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(h.logs.String(), refusedInfo) && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
		if l := h.logs.String(); !strings.Contains(l, refusedInfo) {
			t.Errorf("the server did not refuse the reflected $SRV.INFO answer:\n%s", l)
		}
		// And worker-svc itself may publish nothing but into inboxes.
		svc := &conn{}
		svc.nc = h.connect(url("worker-svc", pw["worker-svc"]), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			svc.mu.Lock()
			svc.denied = append(svc.denied, err.Error())
			svc.mu.Unlock()
		}))
		for _, subj := range []string{"$JS.API.STREAM.DELETE." + h.names.EventsStream(), "$KV." + h.names.RunsBucket() + "." + hostileVictim,
			h.names.IngestSubject(hostileVictim, protocol.KindStatus), worker.InboxPrefix + ".x", "$O." + h.names.OutputsBucket() + ".M.x"} {
			if err := svc.nc.Publish(subj, nil); err != nil {
				t.Fatal(err)
			}
			testenv.WaitFor(t, 5*time.Second, "worker-svc refused a publish to "+subj, func() bool {
				svc.mu.Lock()
				defer svc.mu.Unlock()
				return slices.ContainsFunc(svc.denied, func(d string) bool { return strings.Contains(d, `"`+subj+`"`) })
			})
		}
		h.afterwards(clientNC, consoleNC)
	})

	t.Run("no-auth", func(t *testing.T) {
		s := testenv.RunServer(t)
		h := startHostile(t, bin, s.ClientURL(), s.ClientURL())
		anyone := h.connect(s.ClientURL())
		h.setUp(anyone)
		var reqs []hostileRequest
		for _, run := range []string{hostileVictim, hostileDone, hostileMissing} {
			for _, ep := range []string{"cancel", "input", "interrupt"} {
				reqs = append(reqs, h.requests("anyone", anyone, ep, run, true)...)
			}
		}
		reqs = append(reqs, h.requests("anyone", anyone, "status", "", true)...)
		// micro's $SRV verbs are left out: without users every connection
		// may publish anywhere itself, and the shipped confs' service user
		// is what refuses their reflected answers (above).
		h.attack(reqs, anyone, anyone)
		h.afterwards(anyone, anyone)
	})
}

// The runs the attacks name: one running (it takes input), one ended, one
// that never existed.
const (
	hostileVictim  = "victim"
	hostileDone    = "done"
	hostileMissing = "nosuchrun"
	hostileOther   = "other" // whose token inbox is another run's
)

type hostile struct {
	t        *testing.T
	names    protocol.Names
	node     string
	workerID string
	logs     *testenv.Buffer
	metrics  string
	admin    jetstream.JetStream // with the worker's rights, to look
	observer *nats.Conn          // subscribed to everything
	ctx      context.Context

	mu   sync.Mutex
	seen map[string][]*nats.Msg // observed messages on hostile subjects
	// before the attacks
	doneRev   uint64
	streamsAt map[string]uint64
}

type hostileRequest struct {
	who, endpoint, run, reply string
	nc                        *nats.Conn
	guarded                   bool // one of the endpoints that check the reply
}

// startHostile starts the observer (subscribed to everything) and a worker
// process with workerURL and args.
func startHostile(t *testing.T, bin, observerURL, workerURL string, args ...string) *hostile {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	t.Cleanup(cancel)
	h := &hostile{t: t, names: protocol.MustNames(""), node: "hostile", ctx: ctx, seen: map[string][]*nats.Msg{},
		metrics: fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))}
	cfg := filepath.Join(t.TempDir(), "baton.yaml")
	profile := "profiles:\n  echo:\n    command: [/bin/sh, -c, 'while read -r l; do echo \"echo:$l\"; done; echo eof']\n    stdin: stream\n"
	if err := os.WriteFile(cfg, []byte(profile), 0o644); err != nil {
		t.Fatal(err)
	}
	h.logs = e2e.StartWorker(t, bin, workerURL, testenv.StateDir(t), h.node, append([]string{"--config", cfg, "--metrics-addr", h.metrics}, args...)...)
	sc := bufio.NewScanner(strings.NewReader(h.logs.String()))
	for sc.Scan() {
		var l struct{ Message, Worker string }
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Message == "worker ready" {
			h.workerID = l.Worker
		}
	}
	if h.workerID == "" {
		t.Fatalf("no worker id in the worker's log:\n%s", h.logs.String())
	}
	h.admin = mustJS(t, h.connect(workerURL, nats.CustomInboxPrefix(worker.InboxPrefix)))
	obs := h.connect(observerURL)
	hostileSubjects := map[string]bool{}
	for _, run := range []string{hostileVictim, hostileDone, hostileMissing, ""} {
		for _, r := range h.replies(run) {
			hostileSubjects[r] = true
		}
	}
	if _, err := obs.Subscribe(">", func(m *nats.Msg) {
		if hostileSubjects[m.Subject] {
			h.mu.Lock()
			h.seen[m.Subject] = append(h.seen[m.Subject], m)
			h.mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := obs.Flush(); err != nil {
		t.Fatal(err)
	}
	h.observer = obs
	return h
}

func (h *hostile) connect(url string, opts ...nats.Option) *nats.Conn {
	h.t.Helper()
	// Refusals the attacks expect are not printed (a later option may
	// collect them).
	nc, err := nats.Connect(url, append([]nats.Option{nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})}, opts...)...)
	if err != nil {
		h.t.Fatalf("connect: %v", err)
	}
	h.t.Cleanup(nc.Close)
	return nc
}

// replies are the hostile reply subjects of a request about run.
func (h *hostile) replies(run string) []string {
	if run == "" {
		run = hostileVictim
	}
	return []string{
		"$JS.API.STREAM.DELETE." + h.names.EventsStream(),
		"$KV." + h.names.RunsBucket() + "." + run,
		"$KV." + h.names.LeasesBucket() + "." + lease.LiveKey(h.node, h.workerID),
		"$O." + h.names.OutputsBucket() + ".M.x",
		h.names.IngestSubject(hostileVictim, protocol.KindStatus),
		worker.InboxPrefix + ".x",
		protocol.RunInboxPrefix(hostileOther) + ".x",
	}
}

// requests are one request of who to endpoint about run per hostile reply.
func (h *hostile) requests(who string, nc *nats.Conn, endpoint, run string, guarded bool) []hostileRequest {
	var out []hostileRequest
	for _, reply := range h.replies(run) {
		if !guarded && strings.HasPrefix(reply, protocol.RunInboxPrefix(hostileOther)) {
			// micro's own verbs answer there (worker-svc may publish
			// into any token inbox): an answer carrying no right.
			continue
		}
		out = append(out, hostileRequest{who: who, nc: nc, endpoint: endpoint, run: run, reply: reply, guarded: guarded})
	}
	return out
}

func (h *hostile) subject(r hostileRequest) string {
	switch r.endpoint {
	case "cancel":
		return h.names.CancelSubject(r.run)
	case "input":
		return h.names.InputSubject(r.run)
	case "interrupt":
		return h.names.InterruptSubject(r.run)
	case "status":
		return h.names.WorkerStatusSubject(h.workerID)
	}
	return r.endpoint
}

// setUp starts the victim (running, taking input) and an ended run, and
// notes what the attacks must leave unchanged.
func (h *hostile) setUp(nc *nats.Conn) {
	t := h.t
	c, err := client.New(mustJS(t, nc), h.names)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range []protocol.Job{{RunID: hostileVictim, Profile: "echo"}, {RunID: hostileDone, Profile: "demo"}} {
		if err := c.Submit(h.ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	h.waitState(c, hostileVictim, "running", func(s kv.RunState) bool { return s == kv.RunRunning })
	h.waitState(c, hostileDone, "succeeded", func(s kv.RunState) bool { return s == kv.RunState(protocol.StatusSucceeded) })
	runs, err := h.admin.KeyValue(h.ctx, h.names.RunsBucket())
	if err != nil {
		t.Fatal(err)
	}
	e, err := runs.Get(h.ctx, hostileDone)
	if err != nil {
		t.Fatal(err)
	}
	h.doneRev = e.Revision()
	// Streams nothing writes to while the victim waits for input.
	h.streamsAt = h.lastSeqs()
}

func (h *hostile) waitState(c *client.Client, run, what string, ok func(kv.RunState) bool) {
	testenv.WaitFor(h.t, 60*time.Second, run+" "+what, func() bool {
		rec, err := c.Run(h.ctx, run)
		return err == nil && ok(rec.State)
	})
}

// quietStreams are the streams no legitimate publish reaches while the
// victim waits for input and nothing is submitted.
func (h *hostile) quietStreams() []string {
	return []string{h.names.JobsStream(), h.names.DLQStream(), h.names.InputStream(),
		"OBJ_" + h.names.OutputsBucket(), h.names.WorkspacesStream()}
}

func (h *hostile) lastSeqs() map[string]uint64 {
	h.t.Helper()
	m := map[string]uint64{}
	for _, name := range h.quietStreams() {
		s, err := h.admin.Stream(h.ctx, name)
		if err != nil {
			h.t.Fatalf("stream %s: %v", name, err)
		}
		m[name] = s.CachedInfo().State.LastSeq
	}
	return m
}

// attack sends every request, then one legitimate request per endpoint
// and requester (answered only once the worker has handled every request
// before it on that endpoint), and checks that nothing happened.
func (h *hostile) attack(reqs []hostileRequest, clientNC, consoleNC *nats.Conn) {
	t := h.t
	start := time.Now()
	h.mu.Lock()
	clear(h.seen) // the victim's own start went on its chain
	h.mu.Unlock()
	want := 0
	for _, r := range reqs {
		m := nats.NewMsg(h.subject(r))
		m.Reply = r.reply
		if r.endpoint == "input" {
			m.Data = []byte("hostile\n")
		}
		if err := r.nc.PublishMsg(m); err != nil {
			t.Fatalf("%s: %s with reply %s: %v", r.who, m.Subject, r.reply, err)
		}
		if r.guarded {
			want++
		}
	}
	for _, nc := range []*nats.Conn{clientNC, consoleNC} {
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range reqs {
		if err := r.nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	// Answered, into the requester's own inbox, and after the attacks.
	for _, ep := range []string{"cancel", "input", "interrupt"} {
		m, err := consoleNC.Request(h.subject(hostileRequest{endpoint: ep, run: hostileMissing}), []byte("x"), 10*time.Second)
		if err != nil {
			t.Fatalf("a legitimate %s of a missing run after the attacks: %v", ep, err)
		}
		if code := m.Header.Get(micro.ErrorCodeHeader); code != "404" {
			t.Errorf("a legitimate %s of a missing run after the attacks: %s %s, want 404", ep, code, m.Header.Get(micro.ErrorHeader))
		}
	}
	m, err := consoleNC.Request(h.subject(hostileRequest{endpoint: "status"}), nil, 10*time.Second)
	if err != nil {
		t.Fatalf("a legitimate status request after the attacks: %v", err)
	}
	var st protocol.WorkerStatus
	if err := json.Unmarshal(m.Data, &st); err != nil || !slices.ContainsFunc(st.Runs, func(r protocol.WorkerRun) bool { return r.RunID == hostileVictim }) {
		t.Errorf("the worker no longer holds %s: %s (%v)", hostileVictim, m.Data, err)
	}
	// The observer has everything published before the answers above.
	if err := h.observer.Flush(); err != nil {
		t.Fatal(err)
	}

	h.mu.Lock()
	for subj, ms := range h.seen {
		for _, m := range ms {
			if isAnswer(m) || !strings.HasPrefix(subj, "$KV.") {
				t.Errorf("published on %s (%d messages), first: %.200q %v", subj, len(ms), m.Data, m.Header)
				break
			}
		}
	}
	h.mu.Unlock()
	if names, err := streamNames(h.ctx, h.admin); err != nil || !slices.Contains(names, h.names.EventsStream()) {
		t.Fatalf("streams after the attacks: %v %v; %s is gone", names, err, h.names.EventsStream())
	}
	if now := h.lastSeqs(); !equalMaps(now, h.streamsAt) {
		t.Errorf("streams' last sequences after the attacks: %v, were %v", now, h.streamsAt)
	}
	runs, err := h.admin.KeyValue(h.ctx, h.names.RunsBucket())
	if err != nil {
		t.Fatal(err)
	}
	if e, err := runs.Get(h.ctx, hostileDone); err != nil || e.Revision() != h.doneRev {
		t.Errorf("%s's record after the attacks: %v (revision was %d)", hostileDone, err, h.doneRev)
	}
	if _, err := runs.Get(h.ctx, hostileMissing); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("%s has a record after the attacks: %v", hostileMissing, err)
	}
	recs := kv.NewStore[kv.RunRecord](runs)
	if rec, _, err := recs.Get(h.ctx, hostileVictim); err != nil || rec.CancelRequested || rec.State != kv.RunRunning {
		t.Errorf("%s's record after the attacks: %+v %v", hostileVictim, rec, err)
	}
	leases, err := h.admin.KeyValue(h.ctx, h.names.LeasesBucket())
	if err != nil {
		t.Fatal(err)
	}
	ls := kv.NewStore[kv.LeaseRecord](leases)
	if l, _, err := ls.Get(h.ctx, hostileVictim); err != nil || l.Worker != h.workerID {
		t.Errorf("%s's lease after the attacks: %+v %v", hostileVictim, l, err)
	}
	live := kv.NewStore[kv.LiveRecord](leases)
	if _, _, err := live.Get(h.ctx, lease.LiveKey(h.node, h.workerID)); err != nil {
		t.Errorf("the worker's liveness key after the attacks: %v", err)
	}

	// Every guarded request was counted as refused, and the warnings are
	// bounded.
	var got int
	// (The worker counts a refusal, then logs it: wait for its first
	// warning too.)
	testenv.WaitFor(t, 10*time.Second, fmt.Sprintf("%d refused requests in the metrics, and a warning logged", want), func() bool {
		got = h.refused()
		return got >= want && strings.Contains(h.logs.String(), "refused a request whose reply subject")
	})
	if got != want {
		t.Errorf("baton_requests_refused_total: %d, want %d", got, want)
	}
	warned := strings.Count(h.logs.String(), "refused a request whose reply subject")
	if limit := 2 + int(time.Since(start)/(10*time.Second)); warned == 0 || warned > limit {
		t.Errorf("%d warnings for %d refusals in %v, want 1 to %d", warned, want, time.Since(start), limit)
	}
	if l := h.logs.String(); strings.Contains(l, "stopped publishing") {
		t.Errorf("the worker dropped a run:\n%s", l)
	}
}

// afterwards checks the runs still work: the victim takes input and a
// cancel, and a new run succeeds.
func (h *hostile) afterwards(clientNC, consoleNC *nats.Conn) {
	t := h.t
	in, err := h.admin.Stream(h.ctx, h.names.InputStream())
	if err != nil {
		t.Fatal(err)
	}
	if m, err := in.GetLastMsgForSubject(h.ctx, h.names.InputStoreSubject(hostileVictim)); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("input stored for %s by the attacks: %v %v", hostileVictim, m, err)
	}
	cc, err := client.New(mustJS(t, consoleNC), h.names)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cc.Send(h.ctx, hostileVictim, []byte("hello\n")); err != nil {
		t.Fatalf("send input to %s: %v", hostileVictim, err)
	}
	events, err := h.admin.Stream(h.ctx, h.names.EventsStream())
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 30*time.Second, hostileVictim+" echoing its input", func() bool {
		m, err := events.GetLastMsgForSubject(h.ctx, h.names.RawSubject(hostileVictim))
		return err == nil && bytes.Contains(m.Data, []byte("echo:hello"))
	})
	c, err := client.New(mustJS(t, clientNC), h.names)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(h.ctx, hostileVictim); err != nil {
		t.Fatalf("cancel %s: %v", hostileVictim, err)
	}
	h.waitState(c, hostileVictim, "cancelled", func(s kv.RunState) bool { return s.Terminal() })
	if err := c.Submit(h.ctx, protocol.Job{RunID: "after", Profile: "demo"}); err != nil {
		t.Fatal(err)
	}
	h.waitState(c, "after", "succeeded", func(s kv.RunState) bool { return s == kv.RunState(protocol.StatusSucceeded) })
}

// isAnswer reports whether m is an answer of the micro service: an error
// (its headers) or a JSON reply. Baton's KV values are msgpack.
func isAnswer(m *nats.Msg) bool {
	return m.Header.Get(micro.ErrorCodeHeader) != "" || m.Header.Get(micro.ErrorHeader) != "" ||
		(len(m.Data) > 0 && m.Data[0] == '{' && json.Valid(m.Data))
}

// refused sums baton_requests_refused_total over its labels.
func (h *hostile) refused() int {
	resp, err := http.Get("http://" + h.metrics + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	n := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "baton_requests_refused_total{") {
			v, _ := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
			n += int(v)
		}
	}
	return n
}

func streamNames(ctx context.Context, js jetstream.JetStream) ([]string, error) {
	l := js.StreamNames(ctx)
	var names []string
	for n := range l.Name() {
		names = append(names, n)
	}
	return names, l.Err()
}

func equalMaps(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
