package session

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
)

var t0 = time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)

func rec(id string, live string, cps ...kv.SessionCheckpoint) *kv.SessionRecord {
	return &kv.SessionRecord{ID: id, Profile: "claude", State: kv.SessionIdle, Live: live, Checkpoints: cps}
}

func recSince(id, live string, since time.Time) *kv.SessionRecord {
	r := rec(id, live)
	r.LiveSince = since
	return r
}

// cp is a checkpoint numbered n whose chain is objs.
func cp(n int, objs ...string) kv.SessionCheckpoint {
	return kv.SessionCheckpoint{N: n, Object: objs[len(objs)-1], Run: strings.Split(objs[len(objs)-1], "/")[1], Chain: objs}
}

func TestClaim(t *testing.T) {
	running := &kv.RunRecord{State: kv.RunRunning}
	ended := &kv.RunRecord{State: "succeeded"}
	deleted := rec("s", "")
	deleted.Deleted = true
	for _, tc := range []struct {
		name    string
		rec     *kv.SessionRecord
		profile string
		live    *kv.RunRecord
		want    verdict
		why     string
	}{
		{"a new session", nil, "claude", nil, start, ""},
		{"idle", rec("s", ""), "claude", nil, start, ""},
		{"its own claim again (a redelivery)", rec("s", "r2"), "claude", nil, start, ""},
		{"another run is live", rec("s", "r1"), "claude", running, wait, "session s has a live run, r1 (running)"},
		{"the live run ended, its end unrecorded", rec("s", "r1"), "claude", ended, takeOver, "its live run r1 ended (succeeded)"},
		{"the live run never started", rec("s", "r1"), "claude", nil, takeOver, "its live run r1 never started"},
		{"the live run just claimed", recSince("s", "r1", t0.Add(-time.Minute)), "claude", nil, wait, "session s has a live run, r1 (starting)"},
		{"another profile", rec("s", ""), "codex", nil, refuse, `session s belongs to profile "claude"; the job names "codex"`},
		{"deleted", deleted, "claude", nil, refuse, "session s was deleted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, why := claim(tc.rec, tc.profile, "r2", tc.live, t0)
			if v != tc.want || why != tc.why {
				t.Fatalf("claim = %v %q, want %v %q", v, why, tc.want, tc.why)
			}
		})
	}
}

func TestBeginBoundsRuns(t *testing.T) {
	r := rec("s", "")
	for i := range MaxRuns + 5 {
		begin(r, fmt.Sprint("r", i), t0)
	}
	begin(r, fmt.Sprint("r", MaxRuns+4), t0) // its own claim again
	if len(r.Runs) != MaxRuns || r.RunCount != MaxRuns+5 || r.Runs[0] != "r5" || r.Live != fmt.Sprint("r", MaxRuns+4) || r.State != kv.SessionActive {
		t.Fatalf("%d runs listed, %d counted, first %s, live %s", len(r.Runs), r.RunCount, r.Runs[0], r.Live)
	}
}

func TestEnd(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rec       *kv.SessionRecord
		run       string
		paused    bool
		cp        *kv.SessionCheckpoint
		keep      int
		ok        bool
		state     kv.SessionState
		head      int
		kept      []int
		del       []string
		release   map[string][]string
		cpErrWant string
	}{
		{name: "not the live run", rec: rec("s", "r1"), run: "r0", ok: false, state: kv.SessionIdle},
		{name: "no live run", rec: rec("s", ""), run: "", ok: false, state: kv.SessionIdle},
		{name: "first checkpoint", rec: rec("s", "r1"), run: "r1", cp: ptr(cp(0, "s/r1")), keep: 3, ok: true, state: kv.SessionIdle, head: 1, kept: []int{1}},
		{name: "paused", rec: rec("s", "r2", cp(1, "s/r1")), run: "r2", paused: true, cp: ptr(cp(0, "s/r1", "s/r2")), keep: 3, ok: true, state: kv.SessionPaused, head: 2, kept: []int{1, 2}},
		{name: "no checkpoint", rec: rec("s", "r2", cp(1, "s/r1")), run: "r2", keep: 3, ok: true, state: kv.SessionIdle, head: 1, kept: []int{1}, cpErrWant: "over a limit"},
		{
			name: "past keep: a dropped delta's objects the kept chain still uses stay",
			rec:  rec("s", "r3", cp(1, "s/r1"), cp(2, "s/r1", "s/r2")), run: "r3", cp: ptr(cp(0, "s/r1", "s/r2", "s/r3")), keep: 2,
			ok: true, state: kv.SessionIdle, head: 3, kept: []int{2, 3},
		},
		{
			name: "past keep after a rebase: the old chain goes",
			rec:  rec("s", "r3", cp(1, "s/r1"), cp(2, "s/r1", "s/r2")), run: "r3", cp: ptr(cp(0, "s/r3")), keep: 1,
			ok: true, state: kv.SessionIdle, head: 3, kept: []int{3}, del: []string{"s/r1", "s/r2"},
		},
		{
			name: "a fork's dropped chain: its source's objects released, its own deleted",
			rec:  rec("f", "r5", cp(0, "s/r1", "s/r2"), cp(1, "s/r1", "s/r2", "f/r4")), run: "r5", cp: ptr(cp(0, "f/r5")), keep: 1,
			ok: true, state: kv.SessionIdle, head: 2, kept: []int{2}, del: []string{"f/r4"}, release: map[string][]string{"s": {"s/r1", "s/r2"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.rec
			f, ok := end(r, tc.run, tc.paused, tc.cp, tc.cpErrWant, tc.keep, nil, t0)
			if ok != tc.ok {
				t.Fatalf("end = %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			var ns []int
			for _, c := range r.Checkpoints {
				ns = append(ns, c.N)
			}
			if r.Live != "" || r.State != tc.state || !slices.Equal(ns, tc.kept) || (tc.head > 0 && r.Head().N != tc.head) {
				t.Fatalf("live %q, state %s, checkpoints %v; want state %s, %v", r.Live, r.State, ns, tc.state, tc.kept)
			}
			if !slices.Equal(f.del, tc.del) || fmt.Sprint(f.release) != fmt.Sprint(tc.release) {
				t.Fatalf("delete %q release %v; want %q %v", f.del, f.release, tc.del, tc.release)
			}
			if tc.cp == nil && r.CheckpointError != tc.cpErrWant {
				t.Fatalf("checkpoint error %q", r.CheckpointError)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestSetup: the checkpoint of a session's setup becomes its head while the
// run that made it stays live, once however often it is stored; the run's
// own checkpoint at its end follows it.
func TestSetup(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  *kv.SessionRecord
		run  string
		ok   bool
	}{
		{"the live run's setup", rec("s", "r1"), "r1", true},
		{"not the live run", rec("s", "r1"), "r0", false},
		{"no live run", rec("s", ""), "", false},
		{"stored again by a successor", rec("s", "r1", kv.SessionCheckpoint{N: 1, Object: "s/r1.setup", Chain: []string{"s/r1.setup"}}), "r1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(tc.rec.Checkpoints)
			_, ok := setup(tc.rec, tc.run, kv.SessionCheckpoint{Object: "s/r1.setup", Run: "r1", Chain: []string{"s/r1.setup"}}, 3, t0)
			if ok != tc.ok || (ok && (len(tc.rec.Checkpoints) != before+1 || !tc.rec.Head().Setup || tc.rec.Head().N != 1 || tc.rec.Live != tc.run)) ||
				(!ok && len(tc.rec.Checkpoints) != before) {
				t.Fatalf("setup = %v, record %+v; want %v", ok, tc.rec, tc.ok)
			}
		})
	}
	r := rec("s", "r1")
	setup(r, "r1", kv.SessionCheckpoint{Object: "s/r1.setup", Run: "r1", Chain: []string{"s/r1.setup"}}, 3, t0)
	if _, ok := end(r, "r1", false, ptr(cp(0, "s/r1.setup", "s/r1")), "", 3, nil, t0); !ok || r.Head().N != 2 || r.Head().Setup || !r.Checkpoints[0].Setup {
		t.Fatalf("the run's end after its setup: %+v", r.Checkpoints)
	}
}

// TestLending: a fork keeps its source's objects until it lets go of them,
// and a source deleted meanwhile stays a tombstone until then.
func TestLending(t *testing.T) {
	src := rec("s", "", cp(1, "s/r1"), cp(2, "s/r1", "s/r2"))
	f, borrowed := fork(src, src.Checkpoints[1], "f", map[string]string{"user": "u1"}, t0)
	if f.ForkedFrom.Session != "s" || f.ForkedFrom.Checkpoint != 2 || f.Head().N != 0 || f.Profile != "claude" || f.Labels["user"] != "u1" {
		t.Fatalf("fork %+v", f)
	}
	if fmt.Sprint(borrowed) != "map[s:[s/r1 s/r2]]" {
		t.Fatalf("borrowed %v", borrowed)
	}
	borrow(src, "f", borrowed["s"])
	borrow(src, "f", borrowed["s"]) // a retried fork
	if fmt.Sprint(src.Lent) != "map[s/r1:[f] s/r2:[f]]" {
		t.Fatalf("lent %v", src.Lent)
	}
	// The source rebases past the lent objects: they stay.
	src.Live = "r3"
	fa, _ := end(src, "r3", false, ptr(cp(0, "s/r3")), "", 1, nil, t0)
	if len(fa.del) != 0 {
		t.Fatalf("the source deleted %q, which its fork uses", fa.del)
	}
	// Deleted while lent: a tombstone.
	fd, tomb := remove(src, t0)
	if !tomb || !slices.Equal(fd.del, []string{"s/r3"}) || !src.Deleted {
		t.Fatalf("remove: tombstone %v, delete %q", tomb, fd.del)
	}
	// The fork lets go: nothing keeps them now.
	del := release(src, "f", []string{"s/r1", "s/r2"})
	if !slices.Equal(del, []string{"s/r1", "s/r2"}) || len(src.Lent) != 0 {
		t.Fatalf("release: delete %q, lent %v", del, src.Lent)
	}
	// Released by one of two forks: kept for the other.
	two := rec("s", "", cp(1, "s/r1"))
	borrow(two, "a", []string{"s/r1"})
	borrow(two, "b", []string{"s/r1"})
	if del := release(two, "a", []string{"s/r1"}); len(del) != 0 || fmt.Sprint(two.Lent) != "map[s/r1:[b]]" {
		t.Fatalf("one of two forks released: delete %q, lent %v", del, two.Lent)
	}
	// Released, but the owner's own checkpoint still uses it.
	if del := release(two, "b", []string{"s/r1"}); len(del) != 0 {
		t.Fatalf("deleted %q, which its owner keeps", del)
	}
}

func TestLost(t *testing.T) {
	r := rec("s", "r1", cp(1, "s/r0"))
	if lost(r, "r0", t0) {
		t.Fatal("lost a run that is not live")
	}
	if !lost(r, "r1", t0) || r.Live != "" || r.LostRun != "r1" || r.State != kv.SessionIdle || r.Head().N != 1 {
		t.Fatalf("after the loss: %+v", r)
	}
}

// TestEndSumsUsage: each run's usage is added once, as its end clears
// Live; a repeated end (a successor's) adds nothing.
func TestEndSumsUsage(t *testing.T) {
	r := &kv.SessionRecord{ID: "s", Live: "r1", State: kv.SessionActive}
	u := protocol.Usage{CPUSeconds: 2, Lines: 10, MaxRSSBytes: 5, Agent: protocol.AgentUsage{OutputTokens: 7, CostUSD: 0.5}}
	if _, ok := end(r, "r1", false, nil, "", 3, &u, t0); !ok {
		t.Fatal("end of the live run changed nothing")
	}
	if _, ok := end(r, "r1", false, nil, "", 3, &u, t0); ok {
		t.Fatal("a repeated end changed the record")
	}
	r.Live = "r2"
	u2 := protocol.Usage{CPUSeconds: 1, Lines: 1, MaxRSSBytes: 9, Agent: protocol.AgentUsage{OutputTokens: 3, CostUSD: 0.25}}
	end(r, "r2", false, nil, "", 3, &u2, t0)
	want := protocol.Usage{CPUSeconds: 3, Lines: 11, MaxRSSBytes: 9, Agent: protocol.AgentUsage{OutputTokens: 10, CostUSD: 0.75}}
	if r.Usage != want {
		t.Errorf("session usage %+v, want %+v", r.Usage, want)
	}
}
