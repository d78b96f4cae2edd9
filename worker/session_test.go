package worker_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
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
