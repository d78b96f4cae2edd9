package bench

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestAgentLines(t *testing.T) {
	var out bytes.Buffer
	before := time.Now().UnixNano()
	if err := Agent(context.Background(), &out, AgentOptions{Lines: 50, Size: 200}); err != nil {
		t.Fatal(err)
	}
	after := time.Now().UnixNano()
	lines := strings.SplitAfter(out.String(), "\n")
	if lines[len(lines)-1] != "" || len(lines) != 51 {
		t.Fatalf("%d lines, last %q", len(lines)-1, lines[len(lines)-1])
	}
	for i, l := range lines[:50] {
		if len(l) != 200 {
			t.Fatalf("line %d has %d bytes, want 200", i+1, len(l))
		}
		seq, ts, ok := ParseStamp([]byte(strings.TrimSuffix(l, "\n")))
		if !ok || seq != uint64(i+1) || ts < before || ts > after {
			t.Fatalf("line %d: ParseStamp = %d, %d, %v", i+1, seq, ts, ok)
		}
	}
}

func TestAgentRate(t *testing.T) {
	var out bytes.Buffer
	began := time.Now()
	if err := Agent(context.Background(), &out, AgentOptions{Rate: 200, Duration: 250 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	n := strings.Count(out.String(), "\n")
	// 200 lines/s for 250 ms: line 1 at 0, line 50 at 245 ms.
	if n < 45 || n > 51 || took < 240*time.Millisecond || took > 400*time.Millisecond {
		t.Fatalf("%d lines in %s, want about 50 in 250ms", n, took)
	}
	if !strings.HasPrefix(out.String(), stampPrefix) {
		t.Fatalf("output starts %.40q", out.String())
	}
}

func TestAgentStops(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := Agent(ctx, &bytes.Buffer{}, AgentOptions{Rate: 10, Duration: time.Hour})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Agent after its context ended: %v", err)
	}
	for _, o := range []AgentOptions{{}, {Rate: -1, Lines: 1}, {Lines: -1}, {Duration: time.Second}} {
		if err := Agent(context.Background(), &bytes.Buffer{}, o); !errors.Is(err, ErrAgentOptions) {
			t.Errorf("Agent(%+v) = %v, want ErrAgentOptions", o, err)
		}
	}
	var out bytes.Buffer
	if err := Agent(context.Background(), &out, AgentOptions{Lines: 1, Size: 10}); err != nil || out.Len() != MinStampSize {
		t.Fatalf("a 10-byte ask: %v, %d bytes, want %d", err, out.Len(), MinStampSize)
	}
}

var stampCases = []struct {
	line string
	seq  uint64
	t    int64
	ok   bool
}{
	{`{"type":"bench","seq":1,"t":1764430000123456789,"pad":"xx"}`, 1, 1764430000123456789, true},
	{`{"type":"bench","seq":18446744073709551615,"t":9223372036854775807,"pad":""}`, 1<<64 - 1, 1<<63 - 1, true},
	{`{"type":"bench","seq":0,"t":1,"pad":""}`, 0, 0, false},
	{`{"type":"bench","seq":1,"t":0,"pad":""}`, 0, 0, false},
	{`{"type":"bench","seq":1,"t":-5,"pad":""}`, 0, 0, false},
	{`{"type":"bench","seq":-1,"t":5,"pad":""}`, 0, 0, false},
	{`{"type":"bench","seq":18446744073709551616,"t":5,"pad":""}`, 0, 0, false},
	{`{"type":"bench","seq":1,"t":9223372036854775808,"pad":""}`, 0, 0, false},
	{`{"type":"bench","seq":1}`, 0, 0, false},
	{`{"type":"bench","seq":1,"t":5}`, 0, 0, false},
	{`{"type":"bench","seq":,"t":5,"pad":""}`, 0, 0, false},
	{`{"type":"bench","seq":1,"x":5,"pad":""}`, 0, 0, false},
	{`{"type":"other","seq":1,"t":5,"pad":""}`, 0, 0, false},
	{`{"type":"bench","seq":1 ,"t":5,"pad":""}`, 0, 0, false},
	{``, 0, 0, false},
	{`not json`, 0, 0, false},
}

func TestParseStamp(t *testing.T) {
	for _, tc := range stampCases {
		seq, ts, ok := ParseStamp([]byte(tc.line))
		if ok != tc.ok || seq != tc.seq || ts != tc.t {
			t.Errorf("ParseStamp(%q) = %d, %d, %v; want %d, %d, %v", tc.line, seq, ts, ok, tc.seq, tc.t, tc.ok)
		}
	}
}

// FuzzParseStamp: lines are outside data to the subscriber; ParseStamp
// never panics, and reads back what appendStamp wrote.
func FuzzParseStamp(f *testing.F) {
	for _, tc := range stampCases {
		f.Add([]byte(tc.line), uint64(7), int64(1764430000123456789))
	}
	f.Fuzz(func(t *testing.T, line []byte, seq uint64, ts int64) {
		if s, v, ok := ParseStamp(line); ok && (s == 0 || v <= 0) {
			t.Fatalf("ParseStamp(%q) accepted %d, %d", line, s, v)
		}
		if seq == 0 || ts <= 0 {
			return
		}
		b := appendStamp(nil, seq, ts, 200)
		if len(b) != max(200, len(b)) || b[len(b)-1] != '\n' {
			t.Fatalf("appendStamp made %q", b)
		}
		if s, v, ok := ParseStamp(b[:len(b)-1]); !ok || s != seq || v != ts {
			t.Fatalf("ParseStamp(appendStamp(%d, %d)) = %d, %d, %v", seq, ts, s, v, ok)
		}
	})
}

var statCases = []struct {
	name string
	stat string
	cpu  time.Duration
	ok   bool
}{
	{"plain", "1234 (baton) S 1 1234 1234 0 -1 4194560 500 0 0 0 150 25 0 0 20 0 9 0 100 1000 200 18446744073709551615", 1750 * time.Millisecond, true},
	{"name with spaces and parens", "99 (a (b) c) R 1 99 99 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 1 1 1", 100 * time.Millisecond, true},
	{"no name", "99 baton R 1 99", 0, false},
	{"short", "99 (x) R 1 2 3", 0, false},
	{"not numbers", "99 (x) R 1 99 99 0 -1 0 0 0 0 0 a b 0 0 20 0 1 0 1 1 1", 0, false},
	{"negative", "99 (x) R 1 99 99 0 -1 0 0 0 0 0 -7 3 0 0 20 0 1 0 1 1 1", 0, false},
	{"overflow", "99 (x) R 1 99 99 0 -1 0 0 0 0 0 9223372036854775807 3 0 0 20 0 1 0 1 1 1", 0, false},
	{"empty", "", 0, false},
}

func TestParseStatCPU(t *testing.T) {
	for _, tc := range statCases {
		cpu, err := parseStatCPU([]byte(tc.stat))
		if (err == nil) != tc.ok || cpu != tc.cpu {
			t.Errorf("%s: %s, %v; want %s, ok %v", tc.name, cpu, err, tc.cpu, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrProc) {
			t.Errorf("%s: %v is not ErrProc", tc.name, err)
		}
	}
}

func FuzzParseStatCPU(f *testing.F) {
	for _, tc := range statCases {
		f.Add([]byte(tc.stat))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if cpu, err := parseStatCPU(b); err == nil && cpu < 0 {
			t.Fatalf("negative CPU %s from %q", cpu, b)
		}
	})
}

var rssCases = []struct {
	name   string
	status string
	rss    int64
	ok     bool
}{
	{"real", "Name:\tbaton\nVmPeak:\t 1000 kB\nVmRSS:\t   20480 kB\nThreads:\t9\n", 20480 << 10, true},
	{"no VmRSS", "Name:\tbaton\nThreads:\t9\n", 0, false},
	{"no unit", "VmRSS:\t20480\n", 0, false},
	{"other unit", "VmRSS:\t20 MB\n", 0, false},
	{"not a number", "VmRSS:\tlots kB\n", 0, false},
	{"negative", "VmRSS:\t-1 kB\n", 0, false},
	{"huge", "VmRSS:\t9223372036854775807 kB\n", 0, false},
	{"empty", "", 0, false},
}

func TestParseStatusRSS(t *testing.T) {
	for _, tc := range rssCases {
		rss, err := parseStatusRSS([]byte(tc.status))
		if (err == nil) != tc.ok || rss != tc.rss {
			t.Errorf("%s: %d, %v; want %d, ok %v", tc.name, rss, err, tc.rss, tc.ok)
		}
	}
}

func FuzzParseStatusRSS(f *testing.F) {
	for _, tc := range rssCases {
		f.Add([]byte(tc.status))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if rss, err := parseStatusRSS(b); err == nil && rss < 0 {
			t.Fatalf("negative RSS %d from %q", rss, b)
		}
	})
}

var classCases = []struct {
	cmdline string
	class   string
}{
	{"/s/bin/baton-1f\x00runner-outer\x00--spec\x00/s/runs/r/spec.json\x00", classRunner},
	{"/s/bin/baton-1f\x00runner-inner\x00", classRunner},
	{"/s/bin/baton-1f\x00runner-inner-child\x00", classRunner},
	{"/s/bin/baton-1f\x00runner-init-wait\x00--spec\x00/proc/self/fd/4\x00", classRunner},
	{"/s/bin/baton-runner\x00runner-outer-wait\x00--spec\x00/proc/self/fd/12\x00", classRunner},
	{"/s/bin/baton-1f\x00bench\x00agent\x00--rate\x0050\x00", classAgent},
	{"/s/bin/baton-1f\x00fake-agent\x00--lines\x001\x00", classAgent},
	{"/b/baton\x00--nats\x00nats://x\x00--node\x00n\x00bench\x00worker\x00--id\x00w\x00", classWorker},
	{"/b/baton\x00worker\x00--nats\x00nats://x\x00", classWorker},
	{"/b/baton\x00bench\x00", classOther},
	{"/usr/bin/bash\x00-c\x00sleep 1\x00", classOther},
	{"/b/baton\x00--x\x00bench\x00", classOther},
	{"", classOther},
	{"\x00\x00\x00", classOther},
}

func TestClassify(t *testing.T) {
	for _, tc := range classCases {
		if got := classify([]byte(tc.cmdline)); got != tc.class {
			t.Errorf("classify(%q) = %s, want %s", tc.cmdline, got, tc.class)
		}
	}
}

func FuzzClassify(f *testing.F) {
	for _, tc := range classCases {
		f.Add([]byte(tc.cmdline))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		switch c := classify(b); c {
		case classWorker, classRunner, classAgent, classOther:
		default:
			t.Fatalf("classify(%q) = %q", b, c)
		}
	})
}

func TestQuantile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0, 1}, {0.2, 1}, {0.5, 3}, {0.99, 5}, {1, 5}} {
		if got := quantile(ds, tc.q); got != tc.want {
			t.Errorf("quantile(%v) = %d, want %d", tc.q, got, tc.want)
		}
	}
	if quantile(nil, 0.5) != 0 || median([]time.Duration{7, 9}) != 7 {
		t.Fatal("empty or even-sized input")
	}
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(100 - i)
	}
	if got := quantile(hundred, 0.99); got != 99 {
		t.Fatalf("p99 of 1..100 = %d, want 99", got)
	}
}

func TestCPUBetween(t *testing.T) {
	before := cpuSample{1: {classWorker, 100}, 2: {classRunner, 50}, 3: {classAgent, 10}}
	after := cpuSample{1: {classWorker, 160}, 2: {classRunner, 70}, 4: {classAgent, 5}} // 3 ended, 4 was born
	got := cpuBetween(before, after)
	if got[classWorker] != 60 || got[classRunner] != 20 || got[classAgent] != 5 {
		t.Fatalf("cpuBetween = %v", got)
	}
}

func TestReportPrint(t *testing.T) {
	var out bytes.Buffer
	r := Report{Machine: "m", Results: []Result{{Row: "latency", Target: "t", Measured: "x", Pass: pass}, {Row: "scale", Target: "u", Measured: "y", Pass: miss}}}
	if err := r.Print(&out); err != nil {
		t.Fatal(err)
	}
	want := "baton bench: m\n\nrow      target  measured  result\nlatency  t       x         pass\nscale    u       y         miss\n"
	if out.String() != want {
		t.Fatalf("Print:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestRunRefusesUnknownRow(t *testing.T) {
	if _, err := Run(context.Background(), Config{Rows: []string{"pipeline", "warp"}}); !errors.Is(err, ErrConfig) {
		t.Fatalf("Run with an unknown row: %v", err)
	}
}

var autogroupCases = []struct {
	in   string
	nice int
	ok   bool
}{
	{"/autogroup-1306 nice 0\n", 0, true},
	{"/autogroup-7 nice -20\n", -20, true},
	{"/autogroup-7 nice 19", 19, true},
	{"/autogroup-7 nice 20", 0, false},
	{"/autogroup-7 nice -21", 0, false},
	{"/autogroup-7 nice x", 0, false},
	{"/autogroup-7 nice", 0, false},
	{"autogroup-7 nice 0", 0, false},
	{"/autogroup-7 prio 0", 0, false},
	{"", 0, false},
	{"\n", 0, false},
}

func TestParseAutogroup(t *testing.T) {
	for _, tc := range autogroupCases {
		n, err := parseAutogroup([]byte(tc.in))
		if (err == nil) != tc.ok || n != tc.nice {
			t.Errorf("parseAutogroup(%q) = %d, %v; want %d, ok %v", tc.in, n, err, tc.nice, tc.ok)
		}
		if root := strings.TrimSpace(tc.in) == ""; errors.Is(err, errRootAutogroup) != root {
			t.Errorf("parseAutogroup(%q) = %v; default autogroup %v", tc.in, err, root)
		}
	}
}

func FuzzParseAutogroup(f *testing.F) {
	for _, tc := range autogroupCases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if n, err := parseAutogroup(b); err == nil && (n < -20 || n > 19) {
			t.Fatalf("nice %d from %q", n, b)
		}
	})
}

func TestPhaseTimes(t *testing.T) {
	b := []byte(`{"time":"2026-11-29T18:01:58.961402587Z","stage":"outer","phase":"ready","status":"ok"}
{"time":"2026-11-29T18:01:59.006238086Z","stage":"inner-child","phase":"start-agent","status":"ok","detail":"pid 8"}
{"time":"2026-11-29T18:01:59.1Z","stage":"outer","phase":"ready","status":"ok"}
not json
{"time":"bad","stage":"outer","phase":"x"}
{"stage":"outer","phase":"no-time"}
{"time":"2026-11-29T18:01:59.1Z","phase":"no-stage"}
{"time":"2026-11-29T18:01:59.2Z","stage":"outer","phase":"journal-copy"`)
	got := phaseTimes(b)
	want := map[string]string{"outer/ready": "2026-11-29T18:01:58.961402587Z", "inner-child/start-agent": "2026-11-29T18:01:59.006238086Z"}
	if len(got) != len(want) {
		t.Fatalf("phaseTimes = %v", got)
	}
	for k, v := range want {
		if w, _ := time.Parse(time.RFC3339Nano, v); !got[k].Equal(w) {
			t.Errorf("%s = %s, want %s", k, got[k], v)
		}
	}
}

func FuzzPhaseTimes(f *testing.F) {
	f.Add([]byte(`{"time":"2026-11-29T18:01:58.961402587Z","stage":"outer","phase":"ready","status":"ok"}` + "\n"))
	f.Add([]byte("{}\n{\"time\":1}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for k, v := range phaseTimes(b) {
			if v.IsZero() || !strings.Contains(k, "/") {
				t.Fatalf("phaseTimes(%q) has %q = %s", b, k, v)
			}
		}
	})
}

var ppidCases = []struct {
	name string
	stat string
	ppid int
	ok   bool
}{
	{"real", "4242 (baton-runner) S 1 4242 4242 0 -1 4194560 100 0 0 0 3 1 0 0 20 0 7 0 1 0 0", 1, true},
	{"name with spaces and parens", "7 (a) b) (c) R 99 7 7 0", 99, true},
	{"no name", "4242 S 1 4242", 0, false},
	{"short", "4242 (x) S", 0, false},
	{"not a number", "4242 (x) S one 4242", 0, false},
	{"negative", "4242 (x) S -1 4242", 0, false},
	{"empty", "", 0, false},
}

func TestParseStatPPID(t *testing.T) {
	for _, tc := range ppidCases {
		ppid, err := parseStatPPID([]byte(tc.stat))
		if (err == nil) != tc.ok || ppid != tc.ppid {
			t.Errorf("%s: %d, %v; want %d, ok %v", tc.name, ppid, err, tc.ppid, tc.ok)
		}
	}
}

func FuzzParseStatPPID(f *testing.F) {
	for _, tc := range ppidCases {
		f.Add([]byte(tc.stat))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if ppid, err := parseStatPPID(b); err == nil && ppid < 0 {
			t.Fatalf("negative ppid %d from %q", ppid, b)
		}
	})
}

var pssCases = []struct {
	name   string
	rollup string
	pss    int64
	ok     bool
}{
	{"real", "55d0c0000000-7ffd5d1f2000 ---p 00000000 00:00 0                          [rollup]\nRss:                4096 kB\nPss:                1434 kB\nPss_Dirty:           812 kB\n", 1434 << 10, true},
	{"Pss_Dirty is not Pss", "Pss_Dirty:   812 kB\n", 0, false},
	{"no unit", "Pss: 1434\n", 0, false},
	{"other unit", "Pss: 1 MB\n", 0, false},
	{"not a number", "Pss: lots kB\n", 0, false},
	{"negative", "Pss: -1 kB\n", 0, false},
	{"huge", "Pss: 9223372036854775807 kB\n", 0, false},
	{"empty", "", 0, false},
}

func TestParsePss(t *testing.T) {
	for _, tc := range pssCases {
		pss, err := parsePss([]byte(tc.rollup))
		if (err == nil) != tc.ok || pss != tc.pss {
			t.Errorf("%s: %d, %v; want %d, ok %v", tc.name, pss, err, tc.pss, tc.ok)
		}
	}
}

func FuzzParsePss(f *testing.F) {
	for _, tc := range pssCases {
		f.Add([]byte(tc.rollup))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if pss, err := parsePss(b); err == nil && pss < 0 {
			t.Fatalf("negative PSS %d from %q", pss, b)
		}
	})
}

func TestSpecArg(t *testing.T) {
	for _, tc := range []struct{ cmdline, want string }{
		{"/s/bin/baton-runner-1f\x00runner-outer\x00--spec\x00/s/runs/r/spec.json\x00", "/s/runs/r/spec.json"},
		{"/s/bin/baton-runner-1f\x00runner-inner\x00", ""},
		{"/s/bin/b\x00runner-outer\x00--spec\x00", ""},
		{"--spec\x00/x\x00", ""}, // argv[0] is the program, never a flag
		{"", ""},
	} {
		if got := specArg([]byte(tc.cmdline)); got != tc.want {
			t.Errorf("specArg(%q) = %q, want %q", tc.cmdline, got, tc.want)
		}
	}
}
