package test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox"
	"github.com/batonhq/baton/test/internal/e2e"
)

// lostAgentsGoneWithin is how long after its worker's return a node's
// agents of runs declared lost may still run.
const lostAgentsGoneWithin = 10 * time.Second

// TestLostNodeStopsItsAgents: a node whose only worker is frozen (SIGSTOP)
// past the reaper's grace has its runs ended `lost` once and retried on
// the other node, while their agents go on printing on the frozen node.
// Once the worker is thawed it finds each such agent, stops it, and says
// so (log, metric, the run's lost-stopped note); nothing it held reaches
// the chains after `lost` (the fence refuses its old leases).
func TestLostNodeStopsItsAgents(t *testing.T) {
	const runs = 4
	bin := testenv.BatonBinary(t)
	s := testenv.RunServer(t)
	dirA, dirB := testenv.StateDir(t), testenv.StateDir(t)
	cfg := filepath.Join(t.TempDir(), "baton.yaml")
	if err := os.WriteFile(cfg, []byte(`leaseTTL: 1s
concurrency: 10
diskBudget: false
profiles:
  ticker:
    command: ["{baton}", fake-agent, --rate, "5", --duration, 1h]
    timeout: 2h
    network: none
`), 0o644); err != nil {
		t.Fatal(err)
	}
	metricsA := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	logsA, procA := e2e.StartWorkerProc(t, bin, s.ClientURL(), dirA, "a", "--config", cfg, "--metrics-addr", metricsA)
	nc, js := testenv.Connect(t, s)
	names := protocol.MustNames("")
	c, err := client.New(js, names)
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	statuses := map[string][]protocol.Status{}
	sub, err := nc.Subscribe(names.Prefix()+".runs.*.status", func(m *nats.Msg) {
		if st, err := protocol.ParseStatus(m.Data); err == nil {
			mu.Lock()
			statuses[st.RunID] = append(statuses[st.RunID], st)
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	published := map[string]int{}
	evSub, err := nc.Subscribe(names.Prefix()+".runs.*.events", func(m *nats.Msg) {
		mu.Lock()
		published[strings.Split(m.Subject, ".")[2]]++
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer evSub.Unsubscribe()
	// last returns the run's latest status, if any.
	last := func(id string) (protocol.Status, bool) {
		mu.Lock()
		defer mu.Unlock()
		if sts := statuses[id]; len(sts) > 0 {
			return sts[len(sts)-1], true
		}
		return protocol.Status{}, false
	}
	allAre := func(ids []string, want protocol.StatusType, node string) func() bool {
		return func() bool {
			for _, id := range ids {
				if st, ok := last(id); !ok || st.Status != want || (node != "" && st.Node != node) {
					return false
				}
			}
			return true
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ids := make([]string, runs)
	retries := make([]string, runs)
	for i := range ids {
		ids[i] = fmt.Sprintf("lostnode-%d", i)
		retries[i] = protocol.RetryRunID(ids[i], 2)
		if err := c.Submit(ctx, protocol.Job{RunID: ids[i], Profile: "ticker", Retries: 1}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.WaitFor(t, time.Minute, fmt.Sprintf("the %d runs started on node a, each with lines published", runs), func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			if published[id] < 2 {
				return false
			}
		}
		return true
	})
	if !allAre(ids, protocol.StatusStarted, "a")() {
		t.Fatalf("the runs did not start on node a: %v", statuses)
	}
	runDirA := func(id string) journal.Dir { return journal.Dir(filepath.Join(dirA, "runs", id)) }
	// Whatever happens, no agent of this test outlives it.
	t.Cleanup(func() {
		for _, id := range ids {
			_ = sandbox.Cancel(runDirA(id))
		}
	})
	logsB := e2e.StartWorker(t, bin, s.ClientURL(), dirB, "b", "--config", cfg)

	if err := procA.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := true
	thaw := func() {
		if frozen {
			frozen = false
			_ = procA.Cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	defer thaw()
	froze := time.Now()
	testenv.WaitFor(t, time.Minute, "node a's runs ended lost", allAre(ids, protocol.StatusLost, ""))
	declared := time.Since(froze)
	testenv.WaitFor(t, time.Minute, "their retries started on node b", allAre(retries, protocol.StatusStarted, "b"))
	// The fault under test: the agents of the runs declared lost still run.
	for _, id := range ids {
		if alive, err := sandbox.Alive(runDirA(id)); err != nil || !alive {
			t.Fatalf("run %s: its agent on the frozen node is not running (alive %v, %v): the test tests nothing", id, alive, err)
		}
	}
	// Frozen a while longer, as a slow restart is: the agents' output
	// piles up in their journals for the worker to try to publish.
	time.Sleep(2 * time.Second)
	thaw()
	thawed := time.Now()
	testenv.WaitFor(t, lostAgentsGoneWithin, fmt.Sprintf("the agents of the lost runs stopped within %v of node a's worker's return", lostAgentsGoneWithin), func() bool {
		for _, id := range ids {
			if alive, _ := sandbox.Alive(runDirA(id)); alive {
				return false
			}
		}
		return true
	})
	gone := time.Since(thawed)
	// The worker says so: the note in each run's directory, its log, the
	// metric. It writes them in that order, after it saw the agent gone
	// (and the note's file exists before its text is in it): wait, bounded,
	// for all three, then say which is missing. The late heartbeat's
	// warning is logged after its record, which doctor reads below.
	said := func() bool {
		for _, id := range ids {
			note, err := os.ReadFile(filepath.Join(string(runDirA(id)), journal.LostStoppedName))
			if err != nil || !bytes.Contains(note, []byte("declared lost")) ||
				!strings.Contains(linesWith(logsA.String(), id, 100), "stopped the agent of a run declared lost") {
				return false
			}
		}
		return scrapeMetric(t, metricsA, "baton_lost_agents_stopped_total") == fmt.Sprint(runs) &&
			strings.Contains(logsA.String(), "node heartbeat late")
	}
	for deadline := time.Now().Add(lostAgentsGoneWithin); !said() && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	for _, id := range ids {
		note, err := os.ReadFile(filepath.Join(string(runDirA(id)), journal.LostStoppedName))
		if err != nil || !bytes.Contains(note, []byte("declared lost")) {
			t.Errorf("run %s: its note does not say why its agent was stopped: %q (%v)", id, note, err)
		}
		if !strings.Contains(linesWith(logsA.String(), id, 100), "stopped the agent of a run declared lost") {
			t.Errorf("run %s: node a's worker does not log that it stopped the agent", id)
		}
	}
	if got := scrapeMetric(t, metricsA, "baton_lost_agents_stopped_total"); got != fmt.Sprint(runs) {
		t.Errorf("baton_lost_agents_stopped_total is %q, want %d", got, runs)
	}
	// The freeze was a heartbeat gap far past what leaseTTL 1s allows: the
	// worker warned, and `baton doctor` says what leaseTTL the node needs.
	if !strings.Contains(logsA.String(), "node heartbeat late") {
		t.Errorf("node a's worker did not warn of its late heartbeat")
	}
	out, _ := testenv.Output(exec.Command(bin, "doctor", "--config", cfg, "--state-dir", dirA))
	if !regexp.MustCompile(`(?m)^warn +leaseTTL.*managed no heartbeat for`).Match(out) || !strings.Contains(string(out), "set leaseTTL: ") {
		t.Errorf("baton doctor does not warn that leaseTTL is too short for node a:\n%s", out)
	}

	// Each lost run's chain: the journal's lines as published before the
	// freeze, then one terminal status, `lost`, and nothing after it.
	for _, id := range ids {
		msgs := wholeChain(ctx, t, js, names, id)
		var lines bytes.Buffer
		terminals := 0
		for i, m := range msgs {
			if !strings.HasSuffix(m.Subject(), ".status") {
				lines.Write(m.Data())
				lines.WriteByte('\n')
				continue
			}
			st, err := protocol.ParseStatus(m.Data())
			if err != nil {
				t.Fatalf("run %s: status %d: %v", id, i, err)
			}
			if st.Status.Terminal() {
				terminals++
				if st.Status != protocol.StatusLost || i != len(msgs)-1 {
					t.Errorf("run %s: terminal status %d of %d is %s: want one, lost, last", id, i+1, len(msgs), st.Status)
				}
			}
		}
		if terminals != 1 {
			t.Errorf("run %s: %d terminal statuses on its chain, want 1", id, terminals)
		}
		j, err := os.ReadFile(filepath.Join(string(runDirA(id)), "journal.ndjson"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(j, lines.Bytes()) {
			t.Errorf("run %s: its chain's %d bytes of lines are not a start of its journal (%d bytes)", id, lines.Len(), len(j))
		}
		if len(j) <= lines.Len() {
			t.Errorf("run %s: the journal (%d bytes) holds nothing the chain refused (%d bytes): the agent did not go on while frozen", id, len(j), lines.Len())
		}
	}
	// The retries run on, on node b; cancel them to end the test cleanly.
	for _, id := range retries {
		if _, err := c.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	testenv.WaitFor(t, 30*time.Second, "the retries cancelled", allAre(retries, protocol.StatusCancelled, "b"))
	if t.Failed() {
		t.Logf("node b's log:\n%s", logsB.String())
	}
	t.Logf("%d runs declared lost %v after node a froze; their agents stopped %v after it returned", runs, declared.Round(time.Millisecond), gone.Round(time.Millisecond))
}

// wholeChain reads every message of the run's chain the stream holds now.
func wholeChain(ctx context.Context, t *testing.T, js jetstream.JetStream, names protocol.Names, runID string) []jetstream.Msg {
	t.Helper()
	cons, err := js.OrderedConsumer(ctx, names.EventsStream(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{names.RunFilter(runID)}})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []jetstream.Msg
	for {
		m, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil {
			t.Fatalf("run %s: read its chain after %d messages: %v", runID, len(msgs), err)
		}
		msgs = append(msgs, m)
		md, err := m.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		if md.NumPending == 0 {
			return msgs
		}
	}
}

// scrapeMetric returns the value of the metric line named name (labels
// included) that the worker's metrics endpoint at addr serves.
func scrapeMetric(t *testing.T, addr, name string) string {
	t.Helper()
	hc := http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			return v
		}
	}
	return ""
}
