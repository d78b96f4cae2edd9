package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/provision"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/worker"
)

// cliEnv runs the client subcommands in-process against an embedded server.
type cliEnv struct {
	t   *testing.T
	url string
	js  jetstream.JetStream
	res *provision.Resources
	// stopRelay stops the read relay the workers would serve.
	stopRelay func() error
}

func newCLIEnv(t *testing.T) *cliEnv {
	s := testenv.RunServer(t)
	_, js := testenv.Connect(t, s)
	res, err := provision.Ensure(t.Context(), js, protocol.MustNames(""), provision.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := &cliEnv{t: t, url: s.ClientURL(), js: js, res: res}
	e.startRelay()
	return e
}

// startWorker runs a real worker of cfg, from the baton binary under test,
// until the test ends.
func (e *cliEnv) startWorker(cfg *config.Config) {
	e.t.Helper()
	startWorkerWith(e.t, e.js, cfg, worker.WithStateDir(testenv.StateDir(e.t)), worker.WithBinary(testenv.BatonBinary(e.t)))
}

// startRelay serves the read relay that client commands read through, as
// workers do.
func (e *cliEnv) startRelay() {
	e.t.Helper()
	stop, err := worker.ServeReadRelay(e.t.Context(), e.js.Conn(), protocol.MustNames(""), zerolog.Nop())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = stop() })
	e.stopRelay = stop
}

// start runs `baton --nats URL args...` with stdin in until ctx ends, and
// returns its stdout and stderr as they are written, and its end.
func (e *cliEnv) start(ctx context.Context, stdin io.Reader, args ...string) (out, errOut *testenv.Buffer, done <-chan error) {
	root := newRootCmd()
	out, errOut = &testenv.Buffer{}, &testenv.Buffer{}
	root.SetOut(out)
	root.SetErr(errOut)
	root.SetIn(stdin)
	root.SetArgs(append([]string{"--nats", e.url}, args...))
	end := make(chan error, 1)
	go func() { end <- root.ExecuteContext(ctx) }()
	return out, errOut, end
}

// run executes `baton --nats URL args...` and returns stdout, stderr and
// the error main would turn into the exit status.
func (e *cliEnv) run(stdin string, args ...string) (string, string, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), 20*time.Second)
	defer cancel()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(append([]string{"--nats", e.url}, args...))
	err := root.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

func (e *cliEnv) publish(subject, data string, hdr map[string]string) {
	e.t.Helper()
	msg := nats.NewMsg(subject)
	msg.Data = []byte(data)
	for k, v := range hdr {
		msg.Header.Set(k, v)
	}
	if _, err := e.js.PublishMsg(e.t.Context(), msg); err != nil {
		e.t.Fatal(err)
	}
}

func exitCode(err error) int {
	var ec exitCodeError
	if errors.As(err, &ec) {
		return int(ec)
	}
	if err != nil {
		return 1
	}
	return 0
}

func TestCLISubmit(t *testing.T) {
	e := newCLIEnv(t)
	out, _, err := e.run("prompt from stdin", "submit", "--profile", "demo", "--input", "-", "--label", "pr=9", "--env", "MODE=x")
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(out)
	if !protocol.ValidRunID(id) || !strings.HasPrefix(id, "run-") {
		t.Fatalf("submit printed %q, want a run id", out)
	}
	msg, err := e.res.Jobs.GetLastMsgForSubject(t.Context(), protocol.MustNames("").RunJobSubject())
	if err != nil {
		t.Fatal(err)
	}
	job, err := protocol.DecodeJob(msg.Data, "", protocol.Limits{})
	if err != nil || job.RunID != id || job.Input != "prompt from stdin" || job.Labels["pr"] != "9" || job.Env["MODE"] != "x" {
		t.Fatalf("job on the stream: %+v, %v", job, err)
	}

	out, errOut, err := e.run("", "submit", "--profile", "demo", "--run-id", id, "--json")
	if err != nil {
		t.Fatalf("resubmitting: %v (a duplicate is reported, not an error)", err)
	}
	var res struct {
		RunID     string `json:"runId"`
		Duplicate bool   `json:"duplicate"`
	}
	if json.Unmarshal([]byte(out), &res) != nil || res.RunID != id || !res.Duplicate || !strings.Contains(errOut, "already submitted") {
		t.Errorf("resubmit printed %q / %q", out, errOut)
	}

	if _, _, err := e.run("", "submit", "--input", "x"); err == nil || !strings.Contains(err.Error(), "profile") {
		t.Errorf("submit without --profile: %v", err)
	}
	if _, _, err := e.run("", "submit", "--profile", "demo", "--env", "NOEQUALS"); err == nil || !strings.Contains(err.Error(), "KEY=VALUE") {
		t.Errorf("submit --env NOEQUALS: %v", err)
	}
}

// chain publishes a run's chain as a worker would.
func (e *cliEnv) chain(run string, msgs ...[3]string) {
	names := protocol.MustNames("")
	for i, m := range msgs {
		kind := protocol.KindEvents
		if k := protocol.RunKind(m[0]); k == protocol.KindRaw || k == protocol.KindStatus {
			kind = k
		}
		subj := names.IngestSubject(run, kind)
		hdr := map[string]string{protocol.HeaderOffset: fmt.Sprint(10 * (i + 1))}
		if m[2] != "" {
			hdr[protocol.HeaderChunk] = m[2]
		}
		e.publish(subj, m[1], hdr)
	}
}

func statusJSON(st protocol.StatusType, exit int) string {
	s := protocol.Status{Status: st, RunID: "x", Worker: "w1", Node: "n1", Epoch: 4}
	if st.Terminal() {
		s.ExitCode = &exit
		s.StderrTail = "last words"
	}
	return string(s.Marshal())
}

func TestCLIWatchExitCodes(t *testing.T) {
	e := newCLIEnv(t)
	e.chain("ok",
		[3]string{"status", statusJSON(protocol.StatusStarted, 0), ""},
		[3]string{"events", `{"type":"assistant","message":{"content":[{"type":"text","text":"hi"}]}}`, ""},
		[3]string{"raw", "lo", "1/2"},
		[3]string{"raw", "ose", "2/2"},
		[3]string{"status", statusJSON(protocol.StatusSucceeded, 0), ""})
	e.chain("bad",
		[3]string{"status", statusJSON(protocol.StatusStarted, 0), ""},
		[3]string{"status", statusJSON(protocol.StatusFailed, 3), ""})
	e.chain("broken",
		[3]string{"events", "{", "1/2"},
		[3]string{"events", "{}", ""})

	out, errOut, err := e.run("", "watch", "ok")
	want := "● started  worker=w1 node=n1 epoch=4\nhi\nraw│ loose\n● succeeded  worker=w1 node=n1 epoch=4 exit=0\n  stderr:\n    last words\n"
	if err != nil || out != want {
		t.Errorf("watch ok: err %v\nstdout %q\nwant   %q\nstderr %q", err, out, want, errOut)
	}
	if strings.Contains(errOut, "no record yet") {
		t.Errorf("watch of a run under way says it has no record; stderr %q", errOut)
	}

	out, _, err = e.run("", "watch", "ok", "--json")
	if err != nil || strings.Count(out, "\n") != 4 || !strings.Contains(out, "\nloose\n") {
		t.Errorf("watch --json: %v\n%s", err, out)
	}

	if out, _, err := e.run("", "watch", "bad"); exitCode(err) != 1 || !strings.Contains(out, "● failed") {
		t.Errorf("watch of a failed run: exit %d (%v), out %q; want exit 1", exitCode(err), err, out)
	}
	if _, errOut, err := e.run("", "watch", "broken"); exitCode(err) != 2 || !strings.Contains(errOut, "broken chunked line") {
		t.Errorf("watch of a broken chain: exit %d, stderr %q; want exit 2 with the reason", exitCode(err), errOut)
	}

	// An ended run whose events aged out is reported from its record.
	runs := kv.NewStore[kv.RunRecord](e.res.Runs)
	code := 0
	if _, err := runs.Create(t.Context(), "gone", kv.RunRecord{RunID: "gone", State: "succeeded", ExitCode: &code}); err != nil {
		t.Fatal(err)
	}
	if _, errOut, err := e.run("", "watch", "gone"); err != nil || !strings.Contains(errOut, "no longer in the stream") {
		t.Errorf("watch of an aged-out run: %v, stderr %q", err, errOut)
	}

	// submit --watch follows the run and takes its exit code.
	e.chain("sw", [3]string{"status", statusJSON(protocol.StatusTimeout, 124), ""})
	out, _, err = e.run("", "submit", "--profile", "demo", "--run-id", "sw", "--watch")
	if exitCode(err) != 1 || !strings.HasPrefix(out, "sw\n● timeout") {
		t.Errorf("submit --watch of a timed-out run: exit %d, out %q", exitCode(err), out)
	}
}

func TestCLIRunsCancelDLQ(t *testing.T) {
	e := newCLIEnv(t)
	runs := kv.NewStore[kv.RunRecord](e.res.Runs)
	t0 := time.Now().Add(-time.Hour)
	code := 1
	for _, r := range []kv.RunRecord{
		{RunID: "r-old", State: "failed", Profile: "demo", Node: "n1", Attempt: 1, CreatedAt: t0, ExitCode: &code},
		{RunID: "r-new", State: kv.RunRunning, Profile: "demo", Node: "n2", Worker: "w2", Attempt: 2, CreatedAt: t0.Add(time.Minute),
			Labels: map[string]string{"pr": "9"}},
	} {
		if _, err := runs.Create(t.Context(), r.RunID, r); err != nil {
			t.Fatal(err)
		}
	}

	out, _, err := e.run("", "runs")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "RUN ID") || !strings.HasPrefix(lines[1], "r-new") ||
		!strings.Contains(lines[2], "failed") || !strings.HasSuffix(lines[2], " 1") || !strings.HasSuffix(lines[1], " -") {
		t.Errorf("runs table:\n%s", out)
	}
	out, _, err = e.run("", "runs", "list", "--json")
	var views []map[string]any
	if err != nil || json.Unmarshal([]byte(out), &views) != nil || len(views) != 2 || views[0]["runId"] != "r-new" {
		t.Errorf("runs list --json: %v\n%s", err, out)
	}
	out, _, err = e.run("", "runs", "get", "r-new")
	if err != nil || !strings.Contains(out, "Worker:") || !strings.Contains(out, "w2") || !strings.Contains(out, "Label pr:") {
		t.Errorf("runs get: %v\n%s", err, out)
	}
	if _, _, err := e.run("", "runs", "get", "missing"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("runs get missing: %v", err)
	}

	if _, _, err := e.run("", "cancel", "r-new"); err == nil || !strings.Contains(err.Error(), "no worker answered") {
		t.Errorf("cancel with no worker: %v", err)
	}
	startWorker(t, e.js)
	out, _, err = e.run("", "cancel", "r-new")
	if err != nil || !strings.Contains(out, "cancel requested for run r-new") || !strings.Contains(out, "worker w2") {
		t.Errorf("cancel: %v, %q", err, out)
	}
	if rec, _, _ := runs.Get(t.Context(), "r-new"); !rec.CancelRequested {
		t.Error("cancel did not record the intent")
	}
	if _, _, err := e.run("", "cancel", "r-old"); err == nil || !strings.Contains(err.Error(), "already ended") {
		t.Errorf("cancel of an ended run: %v", err)
	}

	// send: stored for an interactive run, refused with why otherwise.
	if _, err := runs.Create(t.Context(), "r-chat", kv.RunRecord{RunID: "r-chat", State: kv.RunRunning, Profile: "chat",
		Node: "n2", Attempt: 1, CreatedAt: t0, Interactive: true}); err != nil {
		t.Fatal(err)
	}
	out, _, err = e.run("", "send", "r-chat", "--stream-json", "hello")
	if err != nil || !strings.Contains(out, "sent to run r-chat (BATON_INPUT seq ") {
		t.Errorf("send: %v, %q", err, out)
	}
	if _, _, err := e.run("", "send", "r-new", "hi"); err == nil || !strings.Contains(err.Error(), "takes no input") {
		t.Errorf("send to a stdin once run: %v", err)
	}
	if _, _, err := e.run("", "send", "missing", "hi"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("send to a missing run: %v", err)
	}
	if _, _, err := e.run("", "send", "r-old", "hi"); err == nil || !strings.Contains(err.Error(), "already ended") {
		t.Errorf("send to an ended run: %v", err)
	}
	if _, _, err := e.run("", "send", "r-chat"); err == nil || !strings.Contains(err.Error(), "TEXT") {
		t.Errorf("send without text: %v", err)
	}
	out, _, err = e.run("", "interrupt", "r-new")
	if err != nil || !strings.Contains(out, "interrupt sent to run r-new (BATON_INPUT seq ") {
		t.Errorf("interrupt: %v, %q", err, out)
	}
	if _, _, err := e.run("", "interrupt", "r-old"); err == nil || !strings.Contains(err.Error(), "already ended") {
		t.Errorf("interrupt of an ended run: %v", err)
	}

	names := protocol.MustNames("")
	for i := range 3 {
		e.publish(names.DLQSubject(protocol.ReasonMalformed), fmt.Sprintf("{not json %d\x1b", i), map[string]string{
			protocol.HeaderReason: string(protocol.ReasonMalformed),
			protocol.HeaderError:  "malformed job: invalid character 'n'",
		})
	}
	out, _, err = e.run("", "dlq", "--limit", "2")
	lines = strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) != 3 || !strings.HasPrefix(lines[1], "3 ") || !strings.Contains(lines[1], `{not json 2\x1b`) ||
		!strings.Contains(lines[1], "malformed") {
		t.Errorf("dlq --limit 2: %v\n%s", err, out)
	}
	out, _, err = e.run("", "dlq", "list", "--json")
	var entries []map[string]any
	if err != nil || json.Unmarshal([]byte(out), &entries) != nil || len(entries) != 3 || entries[0]["payload"] != "{not json 2\x1b" {
		t.Errorf("dlq list --json: %v\n%s", err, out)
	}
}

func TestClientCommandsHaveExamples(t *testing.T) {
	g := &globals{}
	for _, cmd := range []struct {
		name string
		ex   string
	}{
		{"submit", newSubmitCmd(g).Example}, {"watch", newWatchCmd(g).Example}, {"runs", newRunsCmd(g).Example},
		{"cancel", newCancelCmd(g).Example}, {"dlq", newDLQCmd(g).Example}, {"send", newSendCmd(g).Example},
		{"interrupt", newInterruptCmd(g).Example}, {"rerun", newRerunCmd(g).Example}, {"queue", newQueueCmd(g).Example},
	} {
		if !strings.Contains(cmd.ex, "baton "+cmd.name) {
			t.Errorf("%s --help has no example of itself: %q", cmd.name, cmd.ex)
		}
	}
	for _, c := range append(newRunsCmd(g).Commands(), newDLQCmd(g).Commands()...) {
		if c.Example == "" {
			t.Errorf("%s has no example", c.CommandPath())
		}
	}
}

// startWorker runs a real worker, which answers cancel requests, until the
// test ends or stop.
func startWorker(t *testing.T, js jetstream.JetStream) (stop func()) {
	t.Helper()
	return startWorkerWith(t, js, config.Default(), worker.WithStateDir(t.TempDir()))
}

// startWorkerWith is startWorker with cfg and opts; stop ends the worker
// before the test does.
func startWorkerWith(t *testing.T, js jetstream.JetStream, cfg *config.Config, opts ...worker.Option) (stop func()) {
	t.Helper()
	w, err := worker.New(js.Conn(), cfg, append([]worker.Option{worker.WithNode("cw")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return testenv.Serve(t, "worker", w.Ready(), 20*time.Second, w.Run)
}

// TestClientCommandsWithoutNATS: against a server that cannot be reached, a
// client command says so as the console does, naming the URL but not its
// password, where it said "connect to NATS at" with the URL as given.
func TestClientCommandsWithoutNATS(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	root := newRootCmd()
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	root.SetArgs([]string{"--nats", "nats://u:secret@" + addr, "runs", "list"})
	err = root.ExecuteContext(t.Context())
	if err == nil || !strings.HasPrefix(err.Error(), "cannot reach NATS at nats://u:xxxxx@"+addr+": ") || strings.Contains(err.Error(), "secret") {
		t.Fatalf("runs list without NATS: %v", err)
	}
}
