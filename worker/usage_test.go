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

	"github.com/prometheus/client_golang/prometheus"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/worker"
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
// it is exiting or has exited.
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
			return s, true
		}
	}
	// No Vm lines: the process is exiting and its memory is gone, before
	// it is a zombie (a fresh-clone CI sampled it there, VmHWM 0).
	return procSample{}, false
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
	// A key the configuration names is counted by key too.
	h := newHarness(t, withConfig(func(c *config.Config) { c.KeyWeights = map[string]int{"acme": 1} }))
	h.stopWorker("w1")
	reg := prometheus.NewRegistry()
	h.addWorker("metered", worker.WithMetrics(reg))
	id := newRunID(t)
	const burn = 1500 * time.Millisecond
	seed := strconv.FormatInt(time.Now().UnixNano()%1_000_000_007, 10)
	h.submit(map[string]any{"runId": id, "profile": "fake", "concurrencyKey": "acme",
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
	// The worker that ended the run counted it, by profile.
	for name, want := range map[string]float64{
		"baton_usage_cpu_seconds_total/":        u.CPUSeconds,
		"baton_usage_wall_seconds_total/":       u.WallSeconds,
		"baton_usage_stdout_bytes_total/":       float64(u.StdoutBytes),
		"baton_usage_cost_usd_total/":           u.Agent.CostUSD,
		"baton_usage_agent_tokens_total/output": float64(u.Agent.OutputTokens),
		"baton_usage_agent_tokens_total/cache":  float64(u.Agent.CacheTokens),
		"baton_usage_agent_tokens_total/input":  float64(u.Agent.InputTokens),
		"baton_usage_egress_bytes_total/":       0,
		"baton_usage_key_cpu_seconds_total/":    u.CPUSeconds,
		"baton_usage_key_wall_seconds_total/":   u.WallSeconds,
		"baton_usage_key_cost_usd_total/":       u.Agent.CostUSD,
	} {
		if got := usageCounter(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

// usageCounter reads the counter name ("metric/kind", kind empty for a
// metric by profile alone) of profile fake.
func usageCounter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	metric, kind, _ := strings.Cut(name, "/")
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != metric {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["profile"] == "fake" && labels["kind"] == kind || labels["key"] == "acme" {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s{profile=fake,kind=%q} nor {key=acme}", metric, kind)
	return 0
}

// usageRun runs the fake agent with args, calling disrupt (if set) once
// its run is under way, and returns its terminal status's usage and its
// statuses.
func (h *harness) usageRun(args []string, disrupt func(id string)) (protocol.Usage, string) {
	t := h.t
	t.Helper()
	id := newRunID(t)
	h.submit(map[string]any{"runId": id, "profile": "fake", "args": args})
	if disrupt != nil {
		disrupt(id)
	}
	msgs := h.chain(id, 60*time.Second)
	h.assertChainMatchesJournal(id, msgs)
	st := statuses(t, msgs)
	kinds := ""
	for _, s := range st {
		kinds += string(s.Status) + ","
	}
	u := st[len(st)-1].Usage
	if u == nil {
		t.Fatalf("no usage on the terminal status (statuses %s)", kinds)
	}
	return *u, kinds
}

// sameCounts compares two runs' usage but for the clocks and memory,
// which differ run to run.
func sameCounts(t *testing.T, what string, got, want protocol.Usage) {
	t.Helper()
	if got.CPUSeconds <= 0 || want.CPUSeconds <= 0 || got.MaxRSSBytes <= 0 {
		t.Errorf("%s: cpu %v and %v, max rss %d: the runner's figures are missing", what, got.CPUSeconds, want.CPUSeconds, got.MaxRSSBytes)
	}
	for _, u := range []*protocol.Usage{&got, &want} {
		u.WallSeconds, u.CPUSeconds, u.CPUUserSeconds, u.CPUSystemSeconds, u.MaxRSSBytes = 0, 0, 0, 0, 0
	}
	if got != want || want.Lines < 500 || want.Agent.OutputTokens == 0 {
		t.Errorf("%s: %+v\nwithout: %+v", what, got, want)
	}
}

var usageArgs = []string{"--lines", "500", "--rate", "250", "--raw-every", "11", "--seed", "31"}

// TestUsageSurvivesHandoff: a run handed off mid-stream has the usage of
// the same run never handed off, but for its clocks.
func TestUsageSurvivesHandoff(t *testing.T) {
	h := newHarness(t)
	_, stopSecond := h.addWorker("w2")
	defer stopSecond()
	plain, kinds := h.usageRun(usageArgs, nil)
	if kinds != "started,succeeded," {
		t.Fatalf("statuses %s", kinds)
	}
	handed, kinds := h.usageRun(usageArgs, func(id string) {
		holder := h.waitStatus(id, protocol.StatusStarted).Worker
		h.waitLines(id, 150)
		h.stopWorker(holder)
	})
	if kinds != "started,handoff,attached,succeeded," {
		t.Fatalf("statuses %s", kinds)
	}
	sameCounts(t, "handed off", handed, plain)
}

// TestUsageSurvivesCrash: a run whose worker crashed mid-stream (its
// lease expired, another worker took it over from the chain) has the
// usage of the same run that never changed hands, but for its clocks.
func TestUsageSurvivesCrash(t *testing.T) {
	h := newHarness(t)
	plain, _ := h.usageRun(usageArgs, nil)
	h.stopWorker("w1")
	h.addWorker("crashy", worker.WithGrace(0))
	crashed, kinds := h.usageRun(usageArgs, func(id string) {
		if holder := h.waitStatus(id, protocol.StatusStarted).Worker; holder != "crashy" {
			t.Fatalf("run started by %s", holder)
		}
		h.addWorker("w2")
		h.waitLines(id, 150)
		h.stopWorker("crashy")
	})
	if !strings.Contains(kinds, "attached") || strings.Contains(kinds, "handoff") {
		t.Fatalf("statuses %s: want a take-over after the crash", kinds)
	}
	sameCounts(t, "crashed", crashed, plain)
}
