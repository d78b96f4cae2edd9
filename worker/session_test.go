package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox"
	"github.com/batonhq/baton/worker"
)

// sessionAgent writes script as an agent the sandbox can run (a mount of
// a directory the sandbox uid reaches) and returns the profile that runs
// it: /bin/sh /opt/agent/agent.sh, resume args placed after it.
func sessionAgent(t *testing.T, script string, sess *config.Session) config.Profile {
	t.Helper()
	dir, err := os.MkdirTemp("", "baton-agent-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agent.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return config.Profile{
		Command: []string{"/bin/sh", "/opt/agent/agent.sh"}, AllowArgs: config.AnyArgs, Timeout: time.Minute,
		Mounts: []config.Mount{{Source: dir, Target: "/opt/agent"}}, Session: sess,
	}
}

// submitSession publishes a job of a session on its subject, as
// client.Submit does.
func (h *harness) submitSession(job map[string]any) {
	h.t.Helper()
	b, err := json.Marshal(job)
	if err != nil {
		h.t.Fatal(err)
	}
	msg := nats.NewMsg(h.names.SessionJobSubject(job["session"].(string)))
	msg.Data = b
	msg.Header.Set(nats.MsgIdHdr, job["runId"].(string))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := h.js.PublishMsg(ctx, msg); err != nil {
		h.t.Fatalf("submit: %v", err)
	}
}

func (h *harness) session(id string) kv.SessionRecord {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := kv.Open[kv.SessionRecord](ctx, h.js, h.names.SessionsBucket())
	if err != nil {
		h.t.Fatal(err)
	}
	rec, _, err := st.Get(ctx, id)
	if err != nil {
		h.t.Fatalf("session %s: %v", id, err)
	}
	return rec
}

// journalText is a run's journal before its sentinel.
func (h *harness) journalText(runID string) string {
	h.t.Helper()
	b, err := os.ReadFile(filepath.Join(h.stateDir, "runs", runID, "journal.ndjson"))
	if err != nil {
		h.t.Fatal(err)
	}
	s := string(b)
	if i := strings.LastIndex(s, `{"__exit"`); i >= 0 {
		s = s[:i]
	}
	return s
}

// TestSessionRunsContinue: three runs of one session, submitted at once,
// run one at a time in their order; each starts from the last one's
// workspace and home at /workspace and /home/agent, with the resume args
// once there is a checkpoint; each run's end stores a checkpoint named on
// its terminal status, and the session's head follows; the chain of each
// run equals its journal.
func TestSessionRunsContinue(t *testing.T) {
	const script = `echo "args $*"; echo "pwd $PWD home $HOME"
cat notes.txt 2>/dev/null; cat ~/.agent/memory 2>/dev/null
n=$(ls ~/.agent 2>/dev/null | wc -l)
for a; do last=$a; done; echo "run $last" >> notes.txt; mkdir -p ~/.agent; echo "memory of $n" > ~/.agent/memory; touch ~/.agent/m$n
sleep 1; echo '{"type":"result"}'
`
	h := newHarness(t, withConfig(func(c *config.Config) {
		c.Profiles["sess"] = sessionAgent(t, script, &config.Session{ResumeArgs: []string{"--resumed"}})
	}))
	ids := []string{newRunID(t), newRunID(t), newRunID(t)}
	for i, id := range ids {
		h.submitSession(map[string]any{"runId": id, "profile": "sess", "session": "s1", "args": []string{string(rune('a' + i))}})
	}
	var prevEnd time.Time
	for i, id := range ids {
		msgs := h.chain(id, time.Minute)
		h.assertChainMatchesJournal(id, msgs)
		sts := statuses(t, msgs)
		started, end := sts[0], sts[len(sts)-1]
		if end.Status != protocol.StatusSucceeded || end.Session != "s1" || end.Checkpoint == nil || end.CheckpointError != "" {
			t.Fatalf("run %d ended %+v", i+1, end)
		}
		if !started.Time.After(prevEnd) {
			t.Fatalf("run %d started at %v, before run %d ended at %v: two runs of a session were live at once", i+1, started.Time, i, prevEnd)
		}
		prevEnd = end.Time
		out := h.journalText(id)
		want := []string{"pwd /workspace home /home/agent"}
		switch i {
		case 0:
			want = append(want, "args a\n")
		case 1:
			want = append(want, "args --resumed b\n", "run a\n", "memory of 0\n")
		case 2:
			want = append(want, "args --resumed c\n", "run a\nrun b\n", "memory of 2\n")
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("run %d's journal lacks %q:\n%s", i+1, w, out)
			}
		}
		if i > 0 && end.Checkpoint.Base {
			t.Errorf("run %d's checkpoint holds the whole tree; want what changed", i+1)
		}
	}
	// The head moves once the last terminal status is recorded.
	var rec kv.SessionRecord
	testenv.WaitFor(t, 10*time.Second, "session s1 to have no live run", func() bool {
		rec = h.session("s1")
		return rec.Live == ""
	})
	if rec.Live != "" || rec.State != kv.SessionIdle || rec.RunCount != 3 || strings.Join(rec.Runs, " ") != strings.Join(ids, " ") ||
		len(rec.Checkpoints) != 3 || rec.Head().Run != ids[2] || rec.Head().N != 3 || len(rec.Head().Chain) != 3 || rec.Profile != "sess" {
		t.Fatalf("session record %+v", rec)
	}
	if r := h.record(ids[2]); r.Session != "s1" || r.Checkpoint == nil || r.Checkpoint.Object != rec.Head().Object {
		t.Fatalf("run record: session %q, checkpoint %+v", r.Session, r.Checkpoint)
	}
	// The session's usage sums its runs', each once; a run's checkpoint
	// is in its usage.
	var sum protocol.Usage
	for _, id := range ids {
		u := h.record(id).Usage
		if u == nil || u.CheckpointBytes <= 0 || u.Lines < 3 {
			t.Fatalf("run %s's usage %+v", id, u)
		}
		sum.Add(*u)
	}
	if rec.Usage != sum {
		t.Errorf("session usage %+v, its runs' sum %+v", rec.Usage, sum)
	}
}

// TestSessionJobMovedAndRefused: a session's job on the run subject is
// moved to its session's and runs; one naming another profile than the
// session's, or a workspace archive once the session has a checkpoint, is
// refused with why.
func TestSessionJobMovedAndRefused(t *testing.T) {
	h := newHarness(t, withConfig(func(c *config.Config) {
		c.Profiles["sess"] = sessionAgent(t, `echo '{"type":"result"}'`, nil)
	}))
	id := newRunID(t)
	h.submit(map[string]any{"runId": id, "profile": "sess", "session": "s2"})
	if st := h.terminal(id); st.Status != protocol.StatusSucceeded || st.Checkpoint == nil {
		t.Fatalf("a moved session job ended %+v", st)
	}
	h.submitSession(map[string]any{"runId": newRunID(t), "profile": "fake", "session": "s2"})
	h.submitSession(map[string]any{"runId": newRunID(t), "profile": "sess", "session": "s2", "workspace": map[string]string{"object": h.putArchive(entry{name: "a", body: "a"})}})
	dead := h.waitDLQ(2, 30*time.Second)
	var errs []string
	for _, m := range dead {
		errs = append(errs, m.Header.Get(protocol.HeaderError))
		if r := m.Header.Get(protocol.HeaderReason); r != string(protocol.ReasonInvalid) {
			t.Errorf("reason %q, want invalid", r)
		}
	}
	all := strings.Join(errs, "\n")
	for _, w := range []string{`session s2 belongs to profile "sess"; the job names "fake"`, "a workspace archive seeds only its first run"} {
		if !strings.Contains(all, w) {
			t.Errorf("the DLQ does not say %q:\n%s", w, all)
		}
	}
	if rec := h.session("s2"); rec.Live != "" || rec.RunCount != 1 {
		t.Fatalf("refused jobs changed the session: %+v", rec)
	}
}

// TestSessionTerminalRecordBySuccessor: a session run's end recorded by a
// successor (the server down past the grace between the terminal status
// and the record, as in TestTerminalRecordOutlivesAnOutage) keeps the
// checkpoint the status names on the run's record, as the session's head.
func TestSessionTerminalRecordBySuccessor(t *testing.T) {
	// Mostly an outage's and a lease TTL's wait.
	t.Parallel()
	dir, port := t.TempDir(), testenv.FreePort(t)
	h := newHarness(t, withStore(dir, port), withConfig(func(c *config.Config) {
		c.LeaseTTL = 10 * time.Second
		c.Profiles["sess"] = sessionAgent(t, `echo '{"type":"result"}'`, nil)
	}))
	id := newRunID(t)
	h.outageAtTerminalRecord(dir, port, id, func() {
		h.submitSession(map[string]any{"runId": id, "profile": "sess", "session": "s10"})
	})
	var rec kv.RunRecord
	testenv.WaitFor(t, 3*h.cfg.LeaseTTL, "run "+id+"'s record to say succeeded once the server is back", func() bool {
		rec = h.record(id)
		return rec.State == kv.RunState(protocol.StatusSucceeded)
	})
	var sess kv.SessionRecord
	testenv.WaitFor(t, 10*time.Second, "session s10 to have no live run", func() bool {
		sess = h.session("s10")
		return sess.Live == ""
	})
	head := sess.Head()
	if head == nil || head.Run != id {
		t.Fatalf("session s10's head %+v, want run %s's checkpoint", head, id)
	}
	if rec.Checkpoint == nil || rec.Checkpoint.Object != head.Object || rec.Checkpoint.Digest != head.Digest {
		t.Fatalf("run record's checkpoint %+v, want the session's head %+v", rec.Checkpoint, head)
	}
}

// TestSessionOnAnotherNode: run 1 of a session on node n1, whose worker
// then stops for good; run 2 on node n2, with a state directory of its
// own, finds run 1's workspace and home where run 1 left them.
func TestSessionOnAnotherNode(t *testing.T) {
	const script = `cat notes.txt ~/.cfg 2>/dev/null; echo "on $(hostname) $*" >> notes.txt; echo "home of $*" > ~/.cfg; echo '{"type":"result"}'`
	h := newHarness(t, withConfig(func(c *config.Config) {
		c.Profiles["sess"] = sessionAgent(t, script, nil)
	}))
	first := newRunID(t)
	h.submitSession(map[string]any{"runId": first, "profile": "sess", "session": "s3", "args": []string{"one"}})
	if st := h.terminal(first); st.Status != protocol.StatusSucceeded || st.Checkpoint == nil || st.Node != "n1" {
		t.Fatalf("run 1 ended %+v", st)
	}
	testenv.WaitFor(t, 10*time.Second, "session s3 to have no live run", func() bool { return h.session("s3").Live == "" })
	h.stopWorker("w1")
	h.addWorker("w2", worker.WithNode("n2"), worker.WithStateDir(testenv.StateDir(t)))
	second := newRunID(t)
	h.submitSession(map[string]any{"runId": second, "profile": "sess", "session": "s3", "args": []string{"two"}})
	msgs := h.chain(second, time.Minute)
	sts := statuses(t, msgs)
	if st := sts[len(sts)-1]; st.Status != protocol.StatusSucceeded || st.Node != "n2" {
		t.Fatalf("run 2 ended %+v", st)
	}
	var lines []string
	for _, m := range msgs {
		if strings.HasSuffix(m.Subject(), ".raw") {
			lines = append(lines, string(m.Data()))
		}
	}
	if want := []string{"on baton one", "home of one"}; strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Fatalf("run 2 on n2 printed %q, want %q", lines, want)
	}
}

// TestSessionSetupSurvivesHandoff: the worker holding a session's first
// run stops after setup said it was done and before it checkpointed it;
// the successor finds setup's line in the journal, checkpoints what setup
// made (the session's checkpoint 1, setup's work and not the agent's),
// lets the agent start, and the run ends once with its chain equal to its
// journal.
func TestSessionSetupSurvivesHandoff(t *testing.T) {
	h := newHarness(t, withConfig(func(c *config.Config) {
		p := sessionAgent(t, `cat setup.log; echo ran > agent.log; echo '{"type":"result"}'`, nil)
		p.Setup = []string{"echo installed >> setup.log"}
		c.Profiles["setup"] = p
	}))
	h.stopWorker("w1")
	var stopped atomic.Bool
	_, stopHolder := h.addWorker("w2", worker.WithBeforeSetupCheckpoint(func(ctx context.Context, runID string) {
		stopped.Store(true)
		<-ctx.Done() // until the worker stops
	}))
	defer stopHolder()
	id := newRunID(t)
	h.submitSession(map[string]any{"runId": id, "profile": "setup", "session": "s9"})
	testenv.WaitFor(t, 20*time.Second, "the holder to reach the setup's checkpoint", stopped.Load)
	_, stopSuccessor := h.addWorker("w3")
	defer stopSuccessor()
	h.stopWorker("w2")
	if st := h.terminal(id); st.Status != protocol.StatusSucceeded {
		t.Fatalf("the run ended %+v", st)
	}
	h.assertChainMatchesJournal(id, h.chain(id, time.Minute))
	if got, want := h.journalText(id), "baton setup 1/1: echo installed >> setup.log\nbaton setup done: checkpointing the session\ninstalled\n"; !strings.HasPrefix(got, want) {
		t.Fatalf("the run printed %q, want it to start %q", got, want)
	}
	testenv.WaitFor(t, 10*time.Second, "the run's checkpoint to follow the setup's", func() bool { return len(h.session("s9").Checkpoints) == 2 })
	cps := h.session("s9").Checkpoints
	if !cps[0].Setup || cps[0].Files != 1 || cps[1].Files != 2 || cps[0].Run != id {
		t.Fatalf("checkpoints %+v: want setup's (setup.log alone), then the run's", cps)
	}
}

// TestSessionPauseAndSend: a session's run that waits for input past
// pauseAfter is checkpointed and its sandbox ended (status paused, the
// session paused, no runner left); a send to the session starts its next
// run with the message as its first turn, from the paused run's files; a
// retried send (the same message id) starts nothing twice.
func TestSessionPauseAndSend(t *testing.T) {
	const script = `n=$(cat count 2>/dev/null || echo 0)
while read -r line; do
	n=$((n+1)); echo $n > count
	echo "{\"type\":\"assistant\",\"said\":\"$line\",\"turn\":$n}"
	echo '{"type":"result"}'
done`
	h := newHarness(t, withConfig(func(c *config.Config) {
		p := sessionAgent(t, script, &config.Session{PauseAfter: time.Second})
		p.Stdin, p.TurnEnd = config.StdinStream, &config.TurnEnd{Field: "type", Equals: "result"}
		c.Profiles["chat"] = p
	}))
	c, err := client.New(h.js, h.names)
	if err != nil {
		t.Fatal(err)
	}
	first := newRunID(t)
	h.submitSession(map[string]any{"runId": first, "profile": "chat", "session": "s4", "input": "hello"})
	st := h.terminal(first)
	if st.Status != protocol.StatusPaused || st.Checkpoint == nil || !strings.Contains(st.Reason, "paused after waiting 1s") {
		t.Fatalf("a waiting run ended %+v, want paused with a checkpoint", st)
	}
	dir := journal.Dir(filepath.Join(h.stateDir, "runs", first))
	if alive, err := sandbox.Alive(dir); alive || err != nil {
		t.Fatalf("a paused run's runner is still alive (%v)", err)
	}
	testenv.WaitFor(t, 10*time.Second, "session s4 to be paused", func() bool { return h.session("s4").State == kv.SessionPaused })

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := c.SendSession(ctx, "s4", []byte("again"), client.WithMsgID("send-1"))
	if err != nil || !rep.Started || rep.RunID == "" {
		t.Fatalf("send to a paused session: %+v, %v", rep, err)
	}
	again, err := c.SendSession(ctx, "s4", []byte("again"), client.WithMsgID("send-1"))
	if err != nil || again.RunID != rep.RunID {
		t.Fatalf("a retried send: %+v, %v; want run %s again", again, err, rep.RunID)
	}
	second := h.terminal(rep.RunID)
	if second.Status != protocol.StatusPaused {
		t.Fatalf("the resumed run ended %+v", second)
	}
	out := h.journalText(rep.RunID)
	if !strings.Contains(out, `"said":"again","turn":2`) || strings.Count(out, `"type":"assistant"`) != 1 {
		t.Fatalf("the resumed run's journal:\n%s", out)
	}
	if rec := h.session("s4"); rec.RunCount != 2 {
		t.Fatalf("session after a send and its retry: %+v", rec)
	}
	if _, err := c.SendSession(ctx, "nosuch", []byte("x")); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("send to no session: %v", err)
	}
}

// TestSessionFork: a fork starts from its source's checkpoint without
// copying it and goes its own way; the source is unchanged.
func TestSessionFork(t *testing.T) {
	const script = `cat notes.txt 2>/dev/null; echo "$*" >> notes.txt; echo '{"type":"result"}'`
	h := newHarness(t, withConfig(func(c *config.Config) {
		c.Profiles["sess"] = sessionAgent(t, script, nil)
	}))
	c, err := client.New(h.js, h.names)
	if err != nil {
		t.Fatal(err)
	}
	run := func(session, arg string) string {
		t.Helper()
		id := newRunID(t)
		h.submitSession(map[string]any{"runId": id, "profile": "sess", "session": session, "args": []string{arg}})
		if st := h.terminal(id); st.Status != protocol.StatusSucceeded {
			t.Fatalf("%s ended %+v", id, st)
		}
		testenv.WaitFor(t, 10*time.Second, "session "+session+" to have no live run", func() bool { return h.session(session).Live == "" })
		return strings.TrimSuffix(h.journalText(id), `{"type":"result"}`+"\n")
	}
	run("src", "one")
	run("src", "two")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	one := 1
	v, err := c.ForkSession(ctx, "src", protocol.SessionForkRequest{As: "fork", Checkpoint: &one, Labels: map[string]string{"try": "b"}})
	if err != nil || v.ForkedFrom == nil || v.ForkedFrom.Checkpoint != 1 || v.Head == nil || v.Head.N != 0 || v.Labels["try"] != "b" {
		t.Fatalf("fork: %+v, %v", v, err)
	}
	if got := run("fork", "three"); got != "one\n" {
		t.Fatalf("the fork's first run saw %q, want checkpoint 1's notes", got)
	}
	if got := run("src", "four"); got != "one\ntwo\n" {
		t.Fatalf("the source after the fork saw %q", got)
	}
	if _, err := c.ForkSession(ctx, "src", protocol.SessionForkRequest{As: "fork"}); !errors.Is(err, client.ErrSessionExists) {
		t.Fatalf("a fork onto an existing session: %v", err)
	}
	if err := c.DeleteSession(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	if got := run("fork", "five"); got != "one\nthree\n" {
		t.Fatalf("the fork after its source's delete saw %q", got)
	}
	if _, err := c.Session(ctx, "src"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("a deleted session read: %v", err)
	}
	list, err := c.Sessions(ctx, map[string]string{"try": "b"})
	if err != nil || len(list) != 1 || list[0].ID != "fork" {
		t.Fatalf("sessions labelled try=b: %+v, %v", list, err)
	}
}

// TestSessionSetupOnce: a profile's setup runs in the sandbox before the
// agent of a session's first run, its output on the chain; what it made
// is checkpointed before the agent starts (the session's checkpoint 1,
// holding none of the agent's work), and the run's own checkpoint builds
// on it; the next run starts from the first's checkpoint and runs no
// setup, and a fork of checkpoint 1 starts from setup's work alone. A
// setup that fails fails the run and says which command.
func TestSessionSetupOnce(t *testing.T) {
	h := newHarness(t, withConfig(func(c *config.Config) {
		p := sessionAgent(t, `cat setup.log; cat agent.log 2>/dev/null || echo fresh; echo ran >> agent.log; echo '{"type":"result"}'`, nil)
		p.Setup = []string{"echo installed >> setup.log", "echo to stderr >&2"}
		c.Profiles["setup"] = p
		bad := sessionAgent(t, `echo agent`, nil)
		bad.Setup = []string{"true", "exit 7"}
		c.Profiles["bad"] = bad
	}))
	first, second := newRunID(t), newRunID(t)
	h.submitSession(map[string]any{"runId": first, "profile": "setup", "session": "s5"})
	h.submitSession(map[string]any{"runId": second, "profile": "setup", "session": "s5"})
	for _, id := range []string{first, second} {
		if st := h.terminal(id); st.Status != protocol.StatusSucceeded {
			t.Fatalf("%s ended %+v", id, st)
		}
	}
	if got, want := h.journalText(first), "baton setup 1/2: echo installed >> setup.log\nbaton setup 2/2: echo to stderr >&2\nto stderr\n"+
		"baton setup done: checkpointing the session\ninstalled\nfresh\n"; !strings.HasPrefix(got, want) {
		t.Fatalf("the first run printed %q, want it to start %q", got, want)
	}
	if got := h.journalText(second); got != "installed\nran\n{\"type\":\"result\"}\n" {
		t.Fatalf("the second run printed %q: setup ran again, or its work is gone", got)
	}
	testenv.WaitFor(t, 10*time.Second, "the second run's checkpoint to be the session's head", func() bool {
		return len(h.session("s5").Checkpoints) == 3
	})
	rec := h.session("s5")
	if len(rec.Checkpoints) != 3 || !rec.Checkpoints[0].Setup || rec.Checkpoints[0].Object != "s5/"+first+".setup" ||
		!slices.Equal(rec.Checkpoints[1].Chain, []string{"s5/" + first + ".setup", "s5/" + first}) {
		t.Fatalf("the session's checkpoints %+v, want its setup's, then the first run's on it", rec.Checkpoints)
	}
	c, err := client.New(h.js, h.names)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	one := 1
	if _, err := c.ForkSession(ctx, "s5", protocol.SessionForkRequest{As: "s5-setup", Checkpoint: &one}); err != nil {
		t.Fatal(err)
	}
	forked := newRunID(t)
	h.submitSession(map[string]any{"runId": forked, "profile": "setup", "session": "s5-setup"})
	if st := h.terminal(forked); st.Status != protocol.StatusSucceeded {
		t.Fatalf("the fork's run ended %+v", st)
	}
	if got := h.journalText(forked); got != "installed\nfresh\n{\"type\":\"result\"}\n" {
		t.Fatalf("the run of a fork of the setup's checkpoint printed %q: want setup's work and none of the agent's", got)
	}
	failed := newRunID(t)
	h.submitSession(map[string]any{"runId": failed, "profile": "bad", "session": "s6"})
	st := h.terminal(failed)
	if st.Status != protocol.StatusFailed || st.ExitCode == nil || *st.ExitCode != 7 || !strings.Contains(st.StderrTail, "baton setup 2/2 failed with exit code 7") {
		t.Fatalf("a failed setup ended %+v", st)
	}
}
