package test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/internal/bounded"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/test/internal/e2e"
)

// TestSubmitWatchWithWorkerProcess drives the real binary as a user does:
// a worker process, then `baton submit --watch`, whose exit code follows the
// run; the published chain equals the journal.
func TestSubmitWatchWithWorkerProcess(t *testing.T) {
	bin := testenv.BatonBinary(t)
	s := testenv.RunServer(t)
	dir := testenv.StateDir(t)
	cfg := filepath.Join(t.TempDir(), "baton.yaml")
	if err := os.WriteFile(cfg, []byte("profiles:\n  fake:\n    command: [\"{baton}\", fake-agent]\n    allowArgs: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	e2e.StartWorker(t, bin, s.ClientURL(), dir, "e2e", "--config", cfg, "--metrics-addr", metricsAddr)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for _, tc := range []struct {
		runID    string
		args     []string
		wantExit int
		want     string
	}{
		{"e2e-ok", []string{"--profile", "demo"}, 0, "succeeded"},
		{"e2e-fail", []string{"--profile", "fake", "--arg=--exit-code", "--arg=3", "--arg=--stderr", "--arg=it broke"}, 1, "it broke"},
	} {
		args := append([]string{"submit", "--nats", s.ClientURL(), "--input", "hello from e2e", "--run-id", tc.runID, "--watch"}, tc.args...)
		submit := bounded.Command(ctx, bin, args...)
		var out, errb bytes.Buffer
		submit.Stdout, submit.Stderr = &out, &errb
		err := submit.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tc.wantExit {
			t.Fatalf("submit --watch exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.wantExit, out.String(), errb.String())
		}
		if !strings.HasPrefix(out.String(), tc.runID+"\n") || !strings.Contains(out.String(), tc.want) {
			t.Fatalf("submit output:\n%s", out.String())
		}
	}

	// The same run through the raw protocol: every line of the journal is on
	// the chain, then one terminal status.
	nc, js := testenv.Connect(t, s)
	names := protocol.MustNames("")
	cons, err := js.OrderedConsumer(ctx, names.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{names.RunFilter("e2e-ok")},
	})
	if err != nil {
		t.Fatal(err)
	}
	var lines bytes.Buffer
	terminal := 0
	for terminal == 0 {
		m, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(m.Subject(), ".status") {
			st, _ := protocol.ParseStatus(m.Data())
			if st.Status.Terminal() {
				terminal++
			}
			continue
		}
		lines.Write(m.Data())
		lines.WriteByte('\n')
	}
	journal, err := os.ReadFile(filepath.Join(dir, "runs", "e2e-ok", "journal.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(journal, lines.Bytes()) || !isSentinelOnly(journal[lines.Len():]) {
		t.Fatalf("chain (%d bytes) is not the journal (%d bytes) before its sentinel", lines.Len(), len(journal))
	}
	if !bytes.Contains(lines.Bytes(), []byte("hello from e2e")) {
		t.Fatalf("the agent did not get its input: %s", lines.String())
	}

	// Operators see the runs in the worker's metrics and micro service. A
	// run is counted finished once its end is recorded, just after the
	// terminal status a watch ends on: wait for the counts, bounded.
	wants := []string{`baton_runs_finished_total{status="succeeded"} 1`, `baton_runs_finished_total{status="failed"} 1`, "baton_runs_started_total 2", "baton_lines_published_total "}
	counted := func() bool {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range wants {
			if !bytes.Contains(body, []byte(want)) {
				return false
			}
		}
		return true
	}
	testenv.WaitFor(t, 10*time.Second, fmt.Sprintf("the worker's metrics to show %q", wants), counted)
	reply, err := nc.Request("$SRV.INFO.baton-worker", nil, 2*time.Second)
	if err != nil || !bytes.Contains(reply.Data, []byte(`"node":"e2e"`)) {
		t.Fatalf("micro service info: %v %s", err, replyData(reply))
	}
}

func isSentinelOnly(rest []byte) bool {
	var s map[string]any
	return bytes.Count(rest, []byte("\n")) == 1 && json.Unmarshal(rest, &s) == nil && s["__nonce"] != nil
}

// TestNatsCLIProtocol submits a job exactly as docs/protocol.md shows for any
// NATS client (plain publish with a Msg-Id header) and watches it with a
// plain subscription, as `nats sub` would.
func TestNatsCLIProtocol(t *testing.T) {
	bin := testenv.BatonBinary(t)
	s := testenv.RunServer(t)
	e2e.StartWorker(t, bin, s.ClientURL(), testenv.StateDir(t), "cli")
	nc, _ := testenv.Connect(t, s)
	names := protocol.MustNames("")
	// Subscribe before submitting: a live subscriber sees the whole run.
	sub, err := nc.SubscribeSync("baton.runs.cli-1.>")
	if err != nil {
		t.Fatal(err)
	}
	// Wait for the worker to provision the jobs stream.
	deadline := time.Now().Add(30 * time.Second)
	for {
		msg := nats.NewMsg(names.RunJobSubject())
		msg.Data = []byte(`{"runId":"cli-1","profile":"demo","input":"hello"}`)
		msg.Header.Set("Nats-Msg-Id", "cli-1")
		reply, err := nc.RequestMsg(msg, 2*time.Second)
		if err == nil && !bytes.Contains(reply.Data, []byte(`"error"`)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job not accepted: %v %s", err, replyData(reply))
		}
		time.Sleep(200 * time.Millisecond)
	}
	events, statuses := 0, []string{}
	for {
		m, err := sub.NextMsg(60 * time.Second)
		if err != nil {
			t.Fatalf("after %d events and statuses %v: %v", events, statuses, err)
		}
		if strings.HasSuffix(m.Subject, ".status") {
			st, err := protocol.ParseStatus(m.Data)
			if err != nil {
				t.Fatal(err)
			}
			statuses = append(statuses, string(st.Status))
			if st.Status.Terminal() {
				break
			}
			continue
		}
		if m.Header.Get("Baton-Offset") == "" {
			t.Fatalf("event without Baton-Offset: %v", m.Header)
		}
		events++
	}
	if events < 10 || fmt.Sprint(statuses) != "[started succeeded]" {
		t.Fatalf("%d events, statuses %v", events, statuses)
	}
}

func replyData(m *nats.Msg) string {
	if m == nil {
		return ""
	}
	return string(m.Data)
}

// TestDemoCommand runs the README's first command as a new user does: it
// streams a run to its end, exits 0, and leaves nothing behind, neither
// its state directory nor, for a root worker, the run's mounted workspace
// (and with it its loop device).
func TestDemoCommand(t *testing.T) {
	bin := testenv.BatonBinary(t)
	out, err := testenv.Output(exec.Command(bin, "demo"))
	if err != nil {
		t.Fatalf("baton demo: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("succeeded")) {
		t.Fatalf("baton demo did not report the run succeeded:\n%s", out)
	}
	// Two turns: the first ends, the run waits, the demo's follow-up goes
	// in as the user's turn, the second ends, and the run succeeds.
	rest := string(out)
	for _, want := range []string{"■ done success", "● waiting", "you › Add a regression test", "TestHandleUploadMalformedBody", "■ done success", "● succeeded"} {
		i := strings.Index(rest, want)
		if i < 0 {
			t.Fatalf("baton demo's output lacks %q (in order):\n%s", want, out)
		}
		rest = rest[i+len(want):]
	}
	var state string
	for _, f := range strings.Fields(string(out)) {
		if strings.Contains(f, "baton-demo-") {
			state = strings.TrimRight(f, ",")
			break
		}
	}
	if state == "" {
		t.Fatalf("baton demo did not name its state directory:\n%s", out)
	}
	if _, err := os.Lstat(state); !os.IsNotExist(err) {
		t.Errorf("baton demo left its state directory %s: %v", state, err)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(mounts, []byte(state)) {
		t.Errorf("baton demo left a mount under %s", state)
	}
}
