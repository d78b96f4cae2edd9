package worker_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
)

// procSample is what /proc says of a live process: its CPU time (user
// and system) and its peak resident memory (VmHWM).
type procSample struct {
	cpu   time.Duration
	hwm   int64
	taken bool
}

// findAgent returns the host pid of the process whose command line holds
// every one of args, or 0.
func findAgent(args ...string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		argv := strings.Split(string(b), "\x00")
		all := true
		for _, a := range args {
			if !containsArg(argv, a) {
				all = false
				break
			}
		}
		if all {
			return pid
		}
	}
	return 0
}

func containsArg(argv []string, a string) bool {
	for _, s := range argv {
		if s == a {
			return true
		}
	}
	return false
}

// sampleProc reads pid's CPU time and peak memory from /proc; false once
// it has exited.
func sampleProc(pid int) (procSample, bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procSample{}, false
	}
	// Fields after the command's closing parenthesis: state is the 3rd
	// field, utime the 14th, stime the 15th.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
	if len(f) < 13 || f[0] == "Z" {
		return procSample{}, false
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const hz = 100 // USER_HZ on Linux
	s := procSample{cpu: time.Duration(utime+stime) * time.Second / hz, taken: true}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procSample{}, false
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			s.hwm = kb << 10
		}
	}
	return s, true
}

// journalTruth is what a run's journal holds before its sentinel: its
// bytes and lines (the fake agent writes no runner records).
func (h *harness) journalTruth(runID string) (bytesBefore, lines int64) {
	h.t.Helper()
	j, err := os.ReadFile(filepath.Join(h.stateDir, "runs", runID, "journal.ndjson"))
	if err != nil {
		h.t.Fatal(err)
	}
	body := j[:bytes.LastIndexByte(j[:len(j)-1], '\n')+1] // without the sentinel
	return int64(len(body)), int64(bytes.Count(body, []byte("\n")))
}

// TestUsageOfKnownAgent runs a fake agent that burns a known CPU time and
// prints a known stream, and checks its run's usage against the journal
// (exact) and what /proc said of the agent while it lived.
func TestUsageOfKnownAgent(t *testing.T) {
	h := newHarness(t)
	id := newRunID(t)
	const burn = 1500 * time.Millisecond
	seed := strconv.FormatInt(time.Now().UnixNano()%1_000_000_007, 10)
	h.submit(map[string]any{"runId": id, "profile": "fake",
		"args": []string{"--burn", burn.String(), "--lines", "120", "--rate", "60", "--line-size", "200", "--raw-every", "9", "--seed", seed}})
	var pid int
	testenv.WaitFor(t, 30*time.Second, "the agent's process", func() bool {
		pid = findAgent("fake-agent", seed)
		return pid != 0
	})
	// Sampled until it exits: the last sample bounds its CPU from below
	// (it ends printing its last lines, which cost little).
	var last procSample
	for {
		s, ok := sampleProc(pid)
		if !ok {
			break
		}
		last = s
		time.Sleep(20 * time.Millisecond)
	}
	st := h.terminal(id)
	if st.Status != protocol.StatusSucceeded || st.Usage == nil {
		t.Fatalf("terminal status %+v", st)
	}
	u := *st.Usage
	t.Logf("usage %+v; /proc's last sample %+v", u, last)
	if !last.taken {
		t.Fatal("no /proc sample of the agent")
	}
	if cpu := time.Duration(u.CPUSeconds * float64(time.Second)); cpu < burn || cpu < last.cpu-10*time.Millisecond || cpu > last.cpu+400*time.Millisecond {
		t.Errorf("cpu %v; the agent burned %v, /proc last saw %v", cpu, burn, last.cpu)
	}
	if d := u.CPUSeconds - u.CPUUserSeconds - u.CPUSystemSeconds; d > 1e-6 || d < -1e-6 || u.CPUUserSeconds <= 0 {
		t.Errorf("cpu %v is not user %v + system %v", u.CPUSeconds, u.CPUUserSeconds, u.CPUSystemSeconds)
	}
	// The kernel's two peaks count slightly different pages (within 1 %
	// here).
	if u.MaxRSSBytes < last.hwm-last.hwm/10 || u.MaxRSSBytes > last.hwm+last.hwm/10 {
		t.Errorf("max rss %d; /proc's VmHWM was %d", u.MaxRSSBytes, last.hwm)
	}
	if u.WallSeconds < burn.Seconds()+1.5 || u.WallSeconds > 60 {
		t.Errorf("wall %vs for a %v burn and 2 s of lines", u.WallSeconds, burn)
	}
	wantBytes, wantLines := h.journalTruth(id)
	if u.StdoutBytes != wantBytes || u.Lines != wantLines || u.Inputs != 0 || u.EgressBytes != 0 {
		t.Errorf("stdout %d bytes in %d lines, %d inputs, %d egress bytes; the journal holds %d bytes in %d lines, no records",
			u.StdoutBytes, u.Lines, u.Inputs, u.EgressBytes, wantBytes, wantLines)
	}
	// The fake agent's result line reports tokens and a cost as Claude
	// Code's does.
	if u.Agent.OutputTokens <= 0 || u.Agent.CostUSD <= 0 {
		t.Errorf("agent usage %+v: the result line's figures are missing", u.Agent)
	}
	if rec := h.record(id); rec.Usage == nil || *rec.Usage != u {
		t.Errorf("record's usage %+v, status's %+v", rec.Usage, u)
	}
}

// TestUsageSurvivesHandoff: a run handed off mid-stream has the usage of
// the same run never handed off, but for its clocks.
func TestUsageSurvivesHandoff(t *testing.T) {
	h := newHarness(t)
	_, stopSecond := h.addWorker("w2")
	defer stopSecond()
	args := []string{"--lines", "500", "--rate", "250", "--raw-every", "11", "--seed", "31"}
	run := func(handoff bool) protocol.Usage {
		id := newRunID(t)
		h.submit(map[string]any{"runId": id, "profile": "fake", "args": args})
		if handoff {
			holder := h.waitStatus(id, protocol.StatusStarted).Worker
			h.waitLines(id, 150)
			h.stopWorker(holder)
		}
		msgs := h.chain(id, 60*time.Second)
		h.assertChainMatchesJournal(id, msgs)
		st := statuses(t, msgs)
		kinds := ""
		for _, s := range st {
			kinds += string(s.Status) + ","
		}
		if want := map[bool]string{false: "started,succeeded,", true: "started,handoff,attached,succeeded,"}[handoff]; kinds != want {
			t.Fatalf("statuses %s, want %s", kinds, want)
		}
		u := st[len(st)-1].Usage
		if u == nil {
			t.Fatal("no usage on the terminal status")
		}
		return *u
	}
	plain, handed := run(false), run(true)
	t.Logf("plain %+v\nhanded off %+v", plain, handed)
	if handed.CPUSeconds <= 0 || plain.CPUSeconds <= 0 || handed.MaxRSSBytes <= 0 {
		t.Errorf("cpu %v and %v, max rss %d: the runner's figures are missing", plain.CPUSeconds, handed.CPUSeconds, handed.MaxRSSBytes)
	}
	// The clocks and the memory differ run to run; the counts must not.
	for _, u := range []*protocol.Usage{&plain, &handed} {
		u.WallSeconds, u.CPUSeconds, u.CPUUserSeconds, u.CPUSystemSeconds, u.MaxRSSBytes = 0, 0, 0, 0, 0
	}
	if plain != handed || plain.Lines < 500 || plain.Agent.OutputTokens == 0 {
		t.Errorf("handed off %+v, not handed off %+v", handed, plain)
	}
}
