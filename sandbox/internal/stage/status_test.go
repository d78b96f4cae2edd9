package stage

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/journal"
)

func TestParseStatus(t *testing.T) {
	good := map[string]chainStatus{
		`{"exit":0,"signal":""}`:                                              {Exit: 0},
		`{"exit":3,"signal":""}` + "\n":                                       {Exit: 3},
		`{"exit":137,"signal":"KILL"}`:                                        {Exit: 137, Signal: "KILL"},
		`{"exit":143,"signal":"TERM"}`:                                        {Exit: 143, Signal: "TERM"},
		`{"exit":127,"signal":"","error":"agent \"x\": not found"}`:           {Exit: 127, Error: `agent "x": not found`},
		`{"exit":162,"signal":"34"}`:                                          {Exit: 162, Signal: "34"},
		`{"exit":0,"signal":"","cpuUserUsec":5,"cpuSystemUsec":6,"maxRss":7}`: {Exit: 0, CPUUserUsec: 5, CPUSystemUsec: 6, MaxRSS: 7},
		// JSON decoding makes invalid UTF-8 valid.
		`{"exit":1,"signal":"","error":"` + "\xff" + `"}`: {Exit: 1, Error: "\ufffd"},
	}
	for in, want := range good {
		got, err := parseStatus([]byte(in))
		if err != nil || got != want {
			t.Errorf("parseStatus(%q) = %+v, %v, want %+v", in, got, err, want)
		}
	}
	bad := []string{
		``,
		"\n",
		`null`,
		`{}`,
		`{"exit":0}`,
		`{"exit":0,"signal":"","cpuUserUsec":-1}`,
		`{"exit":0,"signal":"","maxRss":1.5}`,
		`{"signal":""}`,
		`{"exit":-1,"signal":""}`,
		`{"exit":256,"signal":""}`,
		`{"exit":1.5,"signal":""}`,
		`{"exit":"0","signal":""}`,
		`{"exit":137,"signal":"SIGKILL"}`,
		`{"exit":137,"signal":"NOPE"}`,
		`{"exit":0,"signal":"KILL"}`,
		`{"exit":143,"signal":"KILL"}`,
		`{"exit":137,"signal":"9"}`,
		`{"exit":128,"signal":"0"}`,
		`{"exit":0,"signal":"","extra":1}`,
		`{"exit":0,"signal":""}` + "\n" + `{"exit":1,"signal":""}`,
		`{"exit":0,"signal":""} {"exit":1,"signal":""}`,
		`{"exit":0,"signal":"","error":"` + strings.Repeat("x", maxStatusLine) + `"}`,
		`{"exit":0,"signal":""`,
	}
	for _, in := range bad {
		if got, err := parseStatus([]byte(in)); err == nil {
			t.Errorf("parseStatus(%q) = %+v, want an error", in, got)
		}
	}
}

func TestStatusLineRoundTrip(t *testing.T) {
	for _, c := range []chainStatus{
		{Exit: 0},
		{Exit: 137, Signal: "KILL"},
		{Exit: 0, CPUUserUsec: 2_000_000, CPUSystemUsec: 30_000, MaxRSS: 9 << 20},
		{Exit: 1, Error: "sandbox setup (mount-proc): operation not permitted"},
		{Exit: 1, Error: strings.Repeat("é", maxStatusLine)}, // cut to fit, still UTF-8
	} {
		line := c.line()
		if len(line) > maxStatusLine || line[len(line)-1] != '\n' {
			t.Fatalf("line of %+v is %d bytes", c.Exit, len(line))
		}
		got, err := parseStatus(line)
		if err != nil {
			t.Fatalf("parseStatus(line(%+v)): %v", c.Exit, err)
		}
		if len(c.Error) <= maxStatusLine/2 && got != c {
			t.Errorf("round trip %+v -> %+v", c, got)
		}
	}
}

func FuzzParseStatus(f *testing.F) {
	f.Add([]byte(`{"exit":0,"signal":""}`))
	f.Add([]byte(`{"exit":137,"signal":"KILL","error":"x"}` + "\n"))
	f.Add([]byte(`{"exit":162,"signal":"34"}`))
	f.Add([]byte(`{"exit":1e2,"signal":""}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := parseStatus(in)
		if err != nil {
			return
		}
		if c.Exit < 0 || c.Exit > 255 {
			t.Fatalf("accepted exit %d", c.Exit)
		}
		again, err := parseStatus(c.line())
		if err != nil || again != c {
			t.Fatalf("re-encoding %+v gives %+v, %v", c, again, err)
		}
	})
}

func TestStatusOf(t *testing.T) {
	// Linux wait status encoding: exit code in bits 8-15, signal in 0-6.
	cases := []struct {
		ws   syscall.WaitStatus
		want chainStatus
	}{
		{0, chainStatus{Exit: 0}},
		{3 << 8, chainStatus{Exit: 3}},
		{255 << 8, chainStatus{Exit: 255}},
		{syscall.WaitStatus(syscall.SIGKILL), chainStatus{Exit: 137, Signal: "KILL"}},
		{syscall.WaitStatus(syscall.SIGTERM), chainStatus{Exit: 143, Signal: "TERM"}},
		{syscall.WaitStatus(syscall.SIGSEGV) | 0x80, chainStatus{Exit: 139, Signal: "SEGV"}}, // core dumped
	}
	for _, c := range cases {
		if got := statusOf(c.ws); got != c.want {
			t.Errorf("statusOf(%#x) = %+v, want %+v", uint32(c.ws), got, c.want)
		}
	}
}

func TestSignalNames(t *testing.T) {
	for sig := syscall.Signal(1); sig <= 64; sig++ {
		name := signalName(sig)
		back, ok := signalNumber(name)
		if !ok || back != sig {
			t.Errorf("signal %d -> %q -> %d, %v", sig, name, back, ok)
		}
	}
	for name, want := range map[string]syscall.Signal{"KILL": syscall.SIGKILL, "TERM": syscall.SIGTERM, "USR1": syscall.SIGUSR1} {
		if got, ok := signalNumber(name); !ok || got != want {
			t.Errorf("signalNumber(%q) = %d, %v", name, got, ok)
		}
	}
	for _, name := range []string{"", "SIGKILL", "kill", "0", "65", "-9", "9", "NOPE"} {
		if got, ok := signalNumber(name); ok {
			t.Errorf("signalNumber(%q) = %d, want refused", name, got)
		}
	}
}

func TestOutcomeSentinel(t *testing.T) {
	const nonce = "n0nce"
	st := func(exit int, sig, errText string) *chainStatus {
		return &chainStatus{Exit: exit, Signal: sig, Error: errText}
	}
	cases := []struct {
		name string
		o    outcome
		want journal.Sentinel
	}{
		{"exit 0", outcome{status: st(0, "", "")}, journal.Sentinel{Exit: 0, Reason: "exit"}},
		{"exit 3", outcome{status: st(3, "", "")}, journal.Sentinel{Exit: 3, Reason: "exit"}},
		{"exit 1, disk full", outcome{status: st(1, "", ""), diskFull: true}, journal.Sentinel{Exit: 1, Reason: "exit", Detail: DiskFullDetail}},
		{"exit 0, disk full", outcome{status: st(0, "", ""), diskFull: true}, journal.Sentinel{Exit: 0, Reason: "exit"}},
		{"error, disk full", outcome{status: st(127, "", "agent \"x\": not found"), diskFull: true},
			journal.Sentinel{Exit: 127, Reason: "error", Detail: "agent \"x\": not found; " + DiskFullDetail}},
		{"killed by a signal", outcome{status: st(137, "KILL", "")}, journal.Sentinel{Exit: 137, Reason: "signal", Signal: "KILL"}},
		{"agent not found", outcome{status: st(127, "", "agent \"x\": not found")},
			journal.Sentinel{Exit: 127, Reason: "error", Detail: "agent \"x\": not found"}},
		{"timeout, agent died of TERM", outcome{status: st(143, "TERM", ""), stop: stopRequest{reason: "timeout"}},
			journal.Sentinel{Exit: 143, Reason: "timeout", Signal: "TERM"}},
		{"timeout, agent exited cleanly", outcome{status: st(0, "", ""), stop: stopRequest{reason: "timeout"}},
			journal.Sentinel{Exit: 0, Reason: "timeout"}},
		{"timeout, killed after grace", outcome{stop: stopRequest{reason: "timeout"}, killed: true, grace: time.Second, chainErr: "killed by SIGKILL"},
			journal.Sentinel{Exit: 137, Reason: "timeout", Signal: "KILL", Detail: "the agent outlived the 1s grace period after SIGTERM and was killed"}},
		{"cancel", outcome{status: st(143, "TERM", ""), stop: stopRequest{reason: "cancel"}},
			journal.Sentinel{Exit: 143, Reason: "cancel", Signal: "TERM"}},
		{"cancel before the sandbox reported", outcome{stop: stopRequest{reason: "cancel"}, chainErr: "killed by SIGTERM"},
			journal.Sentinel{Exit: 137, Reason: "cancel", Signal: "KILL", Detail: "the sandbox ended before it reported: killed by SIGTERM"}},
		{"runner got TERM, agent handled it", outcome{status: st(0, "", ""), stop: stopRequest{reason: "signal", signal: "TERM"}},
			journal.Sentinel{Exit: 0, Reason: "signal", Signal: "TERM"}},
		{"runner got INT, agent died of TERM", outcome{status: st(143, "TERM", ""), stop: stopRequest{reason: "signal", signal: "INT"}},
			journal.Sentinel{Exit: 143, Reason: "signal", Signal: "TERM"}},
		{"pasta failed", outcome{failure: "pasta exited: exit status 1: no tun", chainErr: "killed by SIGKILL"},
			journal.Sentinel{Exit: 1, Reason: "error", Detail: "pasta exited: exit status 1: no tun"}},
		{"pasta failed during a cancel", outcome{failure: "pasta exited", stop: stopRequest{reason: "cancel"}},
			journal.Sentinel{Exit: 1, Reason: "error", Detail: "pasta exited"}},
		{"pasta died after the agent reported", outcome{failure: "pasta exited", status: st(0, "", "")},
			journal.Sentinel{Exit: 0, Reason: "exit"}},
		{"chain died silently", outcome{chainErr: "exit status 2"},
			journal.Sentinel{Exit: 1, Reason: "error", Detail: "the sandbox ended without reporting the agent's exit: exit status 2"}},
		{"journal failed", outcome{status: st(0, "", ""), killed: true, journalErr: errors.New("no space left on device")},
			journal.Sentinel{Exit: 137, Reason: "error", Signal: "KILL", Detail: "journal: no space left on device"}},
	}
	for _, c := range cases {
		c.want.Nonce = nonce
		if got := c.o.sentinel(nonce); got != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}
