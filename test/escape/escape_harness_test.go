package escape

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox"
	"github.com/batonhq/baton/worker"
)

// Limits of the escape suite's hostile profiles.
const (
	escapePids   = 48
	escapeData   = 256 << 20
	escapeFsize  = 8 << 20
	escapeTmp    = 32 << 20
	escapeNofile = 128
	escapeName   = "th.escape.test"
	escapePool   = 3 // hostile-pooled's prestarted sandboxes, one per attack run
)

// escapeVariant is how an attack's run starts: cold (profile hostile) or
// on a prestarted sandbox (hostile-pooled).
type escapeVariant struct{ suffix, profile string }

// took checks that a run of the pooled variant took a prestarted sandbox.
func (v escapeVariant) took(t *testing.T, w *escapeWorld, id string) {
	t.Helper()
	if took := strings.Contains(w.file(id, "state.ndjson"), `"stage":"outer","phase":"take"`); took != (v.suffix != "") {
		t.Errorf("run %s took a prestarted sandbox: %v, want %v", id, took, v.suffix != "")
	}
}

// waitPool waits until the worker holds n prestarted sandboxes of
// hostile-pooled ready for their runs (not their records on disk, which
// say they wait a moment before the worker has them in hand).
func (w *escapeWorld) waitPool(n int) {
	w.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ready, err := worker.PoolWaiting(w.metrics)
		if err != nil {
			w.t.Fatal(err)
		}
		if ready["hostile-pooled"] >= n {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("the worker holds %d prestarted sandboxes after 60 s, want %d (%d wait on disk)", ready["hostile-pooled"], n, len(sandbox.WaitingPoolEntries(filepath.Join(w.stateDir, "runs"))))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// escapeWorld is one worker, in this process, on an embedded NATS server
// that listens on every address of the host, with the hostile profiles,
// and a test host the network profile allows.
type escapeWorld struct {
	t        *testing.T
	s        *server.Server
	js       jetstream.JetStream
	names    protocol.Names
	stateDir string
	metrics  *prometheus.Registry // the worker's
	agent    string               // the escape agent binary
	host     *testenv.TestHost
	hits     *escapeHits
	natsPort int
	secrets  *escapeSecrets
	git      *escapeGit
}

// escapeHits counts the test host's requests by path.
type escapeHits struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *escapeHits) get(path string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[path]
}

// escapeNeeds fails the test, saying what to install, when this machine
// lacks what the suite's sandbox needs: the suite never skips. suite names
// the suite in the message.
func escapeNeeds(t *testing.T, suite string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("the %s needs root: it runs a root worker (whose agents run as nobody) and a test host in a network namespace", suite)
	}
	for tool, pkg := range map[string]string{"pasta": "passt", "nft": "nftables", "ip": "iproute2"} {
		found := false
		for _, d := range []string{"/usr/sbin", "/usr/bin", "/sbin", "/bin", "/usr/local/bin", "/usr/local/sbin"} {
			if _, err := os.Stat(filepath.Join(d, tool)); err == nil {
				found = true
			}
		}
		if !found {
			t.Fatalf("the %s needs %s: apt-get install %s", suite, tool, pkg)
		}
	}
	// pasta opens /dev/net/tun as the sandbox uid (`baton doctor` says so).
	st, err := os.Stat("/dev/net/tun")
	if err != nil {
		t.Fatalf("pasta needs /dev/net/tun: %v (modprobe tun)", err)
	}
	if st.Mode().Perm()&0o006 != 0o006 {
		if err := os.Chmod("/dev/net/tun", 0o666); err != nil {
			t.Fatal(err)
		}
	}
}

func newEscapeWorld(t *testing.T) *escapeWorld {
	t.Helper()
	escapeNeeds(t, "escape suite")
	w := &escapeWorld{t: t, hits: &escapeHits{n: map[string]int{}}}
	w.agent = escapeBuildAgent(t)
	w.host = testenv.NewTestHost(t, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.hits.mu.Lock()
		w.hits.n[r.URL.Path]++
		w.hits.mu.Unlock()
		fmt.Fprintln(rw, "hello from the test host")
	}))

	limits := config.Limits{Pids: escapePids, Tmp: escapeTmp, Rlimits: config.Rlimits{
		"data": escapeData, "fsize": escapeFsize, "nofile": escapeNofile,
	}}
	mounts := []config.Mount{{Source: filepath.Dir(w.agent)}}
	cfg := config.Default()
	cfg.LeaseTTL = 3 * time.Second
	cfg.Concurrency = 12
	cfg.Profiles["hostile"] = config.Profile{Command: []string{w.agent}, AllowArgs: config.AnyArgs, Timeout: 2 * time.Minute,
		Mounts: mounts, Limits: limits}
	cfg.Profiles["hostile-pooled"] = config.Profile{Command: []string{w.agent}, AllowArgs: config.AnyArgs, Timeout: 2 * time.Minute,
		Mounts: mounts, Limits: limits, Pool: escapePool}
	// Its outputs walk the whole workspace: the trees attacks' target.
	cfg.Profiles["hostile-outputs"] = config.Profile{Command: []string{w.agent}, AllowArgs: config.AnyArgs, Timeout: 2 * time.Minute,
		Mounts: mounts, Limits: limits, Outputs: config.Outputs{Diff: true, Files: []string{"**"}}}
	cfg.Profiles["hostile-net"] = config.Profile{Command: []string{w.agent}, AllowArgs: config.AnyArgs, Timeout: 2 * time.Minute,
		Mounts: mounts, Limits: limits,
		Network: config.Network{
			Allow: []string{escapeName, w.host.Prefix.String()},
			Hosts: map[string]string{escapeName: w.host.Addr.String()},
		}}
	// Host tools, which escapeTools' service serves; no network: the tools
	// socket needs none.
	cfg.Profiles["hostile-tools"] = config.Profile{Command: []string{w.agent}, AllowArgs: config.AnyArgs, Timeout: 2 * time.Minute,
		Mounts: mounts, Limits: limits, Tools: []string{"deploy", "create_pr"},
		ToolLimits: config.ToolLimits{Calls: escapeToolCalls, Bytes: escapeToolBytes, Timeout: 10 * time.Second}}
	w.secrets = newEscapeSecrets(t, w.host, cfg)
	w.git = newEscapeGit(t, w.host, cfg)
	cfg.Profiles["sh"] = config.Profile{Command: []string{"/bin/sh", "-c"}, AllowArgs: config.AnyArgs, Timeout: 2 * time.Minute,
		Limits: config.Limits{Pids: escapePids}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}

	// NATS on every address of the host, as a server often is: the
	// sandbox, not the listening address, must keep the agent out.
	w.s = testenv.RunServerWith(t, func(o *server.Options) { o.Host = "0.0.0.0" })
	w.natsPort = w.s.Addr().(*net.TCPAddr).Port
	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", w.natsPort))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if w.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	w.names = protocol.MustNames(cfg.Prefix)
	w.stateDir = escapeTempDir(t, "baton-escape-", 0o711)
	log := zerolog.Nop()
	if os.Getenv("BATON_TEST_LOG") != "" {
		log = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr}).With().Timestamp().Logger()
	}
	w.metrics = prometheus.NewRegistry()
	wk, err := worker.New(nc, cfg, worker.WithStateDir(w.stateDir), worker.WithNode("escape"),
		worker.WithBinary(testenv.BatonBinary(t)), worker.WithLogger(log), worker.WithMetrics(w.metrics))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Serve(t, "worker", wk.Ready(), 20*time.Second, wk.Run)
	return w
}

// escapeTempDir is a temporary directory with mode perm (t.TempDir's
// parents are 0700, which the sandbox uid cannot search).
func escapeTempDir(t *testing.T, prefix string, perm os.FileMode) string {
	t.Helper()
	d, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	testenv.ReleaseMountsUnder(t, d)
	if err := os.Chmod(d, perm); err != nil {
		t.Fatal(err)
	}
	return d
}

// escapeBuildAgent builds test/escapeagent, statically, where the sandbox
// uid can read it.
func escapeBuildAgent(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(escapeTempDir(t, "baton-escapeagent-", 0o755), "escapeagent")
	cmd := exec.Command("go", "build", "-o", bin, "../escapeagent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := testenv.Build(cmd); err != nil {
		t.Fatalf("build the escape agent: %v\n%s", err, out)
	}
	return bin
}

// submit publishes a job as any NATS client would.
func (w *escapeWorld) submit(job map[string]any) {
	w.t.Helper()
	b, err := json.Marshal(job)
	if err != nil {
		w.t.Fatal(err)
	}
	msg := nats.NewMsg(w.names.RunJobSubject())
	msg.Data = b
	msg.Header.Set(nats.MsgIdHdr, job["runId"].(string))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := w.js.PublishMsg(ctx, msg); err != nil {
		w.t.Fatalf("submit: %v", err)
	}
}

// escapeRun is one run's outcome, as published and as journaled.
type escapeRun struct {
	id      string
	status  protocol.Status
	events  []byte // the lines published, joined
	journal []byte // the journal before its sentinel
	state   string
	// statuses are every status of its chain, in order.
	statuses []protocol.StatusType
	egress   []journal.Egress       // its egress messages, in order
	tools    []protocol.ToolMessage // its tool messages, in order
}

// wait reads the run's chain until its terminal status and checks it
// against the journal (readRun).
func (w *escapeWorld) wait(t *testing.T, runID string, timeout time.Duration) escapeRun {
	t.Helper()
	return readRun(t, w.js, w.names, w.stateDir, runID, timeout)
}

// readRun reads the chain of the run runID of a worker whose state
// directory is stateDir until its terminal status and checks it against
// the journal: every line the agent wrote, attacks included, is published
// once, in order, and the journal ends with one sentinel. An egress or
// tool message stands for the runner's record of the journal it was
// published from.
func readRun(t *testing.T, js jetstream.JetStream, names protocol.Names, stateDir, runID string, timeout time.Duration) escapeRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := js.OrderedConsumer(ctx, names.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{names.RunFilter(runID)},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := escapeRun{id: runID}
	var events bytes.Buffer
	var nonce string
	readNonce := func() string {
		if nonce == "" {
			if nonce, err = sandbox.ReadNonce(journal.Dir(filepath.Join(stateDir, "runs", runID))); err != nil {
				t.Fatal(err)
			}
		}
		return nonce
	}
	for {
		m, err := c.Next(jetstream.FetchMaxWait(time.Until(escapeDeadline(ctx))))
		if err != nil {
			t.Fatalf("run %s: no terminal status after %v: %v\nstate:\n%s", runID, timeout, err, runFile(stateDir, runID, "state.ndjson"))
		}
		if strings.HasSuffix(m.Subject(), ".status") {
			st, err := protocol.ParseStatus(m.Data())
			if err != nil {
				t.Fatalf("bad status %q: %v", m.Data(), err)
			}
			r.statuses = append(r.statuses, st.Status)
			if st.Status.Terminal() {
				r.status = st
				break
			}
			continue
		}
		if strings.HasSuffix(m.Subject(), ".egress") {
			var e journal.Egress
			if err := json.Unmarshal(m.Data(), &e); err != nil {
				t.Fatalf("run %s: egress message %q: %v", runID, m.Data(), err)
			}
			events.Write(journal.EgressRecord{Egress: e, Nonce: readNonce()}.Line())
			r.egress = append(r.egress, e)
			continue
		}
		if strings.HasSuffix(m.Subject(), ".tool") {
			var tm protocol.ToolMessage
			if err := json.Unmarshal(m.Data(), &tm); err != nil || tm.Truncated {
				// A truncated one's record cannot be rebuilt; the suites'
				// calls and answers are far below the max payload.
				t.Fatalf("run %s: tool message %q (truncated: the journal holds more): %v", runID, m.Data(), err)
			}
			rec := journal.ToolRecord{Call: tm.Call, Nonce: readNonce(), Phase: tm.Phase, Name: tm.Name, Error: tm.Error}
			if tm.Phase == journal.ToolCall {
				rec.Args = tm.Args
			} else if tm.Result != nil {
				rec.Result = []byte(*tm.Result)
			}
			events.Write(rec.Line())
			r.tools = append(r.tools, tm)
			continue
		}
		events.Write(m.Data())
		if chunk := m.Headers().Get(protocol.HeaderChunk); chunk != "" {
			if i, n, _ := strings.Cut(chunk, "/"); i != n {
				continue
			}
		}
		events.WriteByte('\n')
	}
	r.events = events.Bytes()
	j := []byte(runFile(stateDir, runID, "journal.ndjson"))
	if len(j) == 0 || j[len(j)-1] != '\n' {
		t.Fatalf("run %s: journal %q does not end with a line", runID, j)
	}
	last := bytes.LastIndexByte(j[:len(j)-1], '\n') + 1
	if !bytes.Contains(j[last:], []byte(`"__nonce"`)) {
		t.Fatalf("run %s: the journal's last line %q is no sentinel", runID, j[last:])
	}
	r.journal = j[:last]
	if !bytes.Equal(r.events, r.journal) {
		t.Errorf("run %s: published lines differ from the journal\npublished %q\njournal   %q", runID, r.events, r.journal)
	}
	r.state = runFile(stateDir, runID, "state.ndjson")
	return r
}

func escapeDeadline(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// file reads a file of a run's directory.
func (w *escapeWorld) file(runID, name string) string { return runFile(w.stateDir, runID, name) }

// runFile reads a file of the directory of run runID in stateDir.
func runFile(stateDir, runID, name string) string {
	b, err := os.ReadFile(filepath.Join(stateDir, "runs", runID, name))
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	return string(b)
}

// escapeAttempt is one line of the escape agent.
type escapeAttempt struct {
	Attempt string `json:"attempt"`
	Blocked bool   `json:"blocked"`
	Detail  string `json:"detail"`
}

// attempts parses the agent's lines, and checks that every attempt was
// blocked, every "allowed:" one was not, and each of want was made.
func (r escapeRun) attempts(t *testing.T, want ...string) []escapeAttempt {
	t.Helper()
	var out []escapeAttempt
	made := map[string]bool{}
	for _, line := range strings.Split(string(r.journal), "\n") {
		var a escapeAttempt
		if json.Unmarshal([]byte(line), &a) != nil || a.Attempt == "" {
			continue
		}
		out = append(out, a)
		made[a.Attempt] = true
		allowed := strings.HasPrefix(a.Attempt, "allowed:")
		switch {
		case allowed && a.Blocked:
			t.Errorf("%s: allowed traffic failed: %s", a.Attempt, a.Detail)
		case !allowed && !a.Blocked:
			t.Errorf("ESCAPE: %s: %s", a.Attempt, a.Detail)
		default:
			t.Logf("%-60s %s", a.Attempt, escapeShort(a.Detail))
		}
	}
	for _, w := range want {
		if !made[w] {
			t.Errorf("the agent did not report the attempt %q (journal:\n%s)", w, r.journal)
		}
	}
	return out
}

func escapeShort(s string) string {
	if len(s) > 110 {
		return s[:110] + "…"
	}
	return s
}

// hostAddrs are the host's own addresses, as the agent should try them.
func escapeHostAddrs(t *testing.T) []string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, _ := netip.AddrFromSlice(n.IP)
		if ip = ip.Unmap(); ip.IsLoopback() || ip.IsLinkLocalUnicast() {
			continue
		}
		out = append(out, ip.String())
	}
	return out
}
