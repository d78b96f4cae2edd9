package stage

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/batonhq/baton/sandbox/internal/chain"
	"github.com/batonhq/baton/sandbox/runspec"
)

func TestRlimitsFor(t *testing.T) {
	for _, c := range []struct {
		name string
		l    runspec.Limits
		want []rlimit
	}{
		{"defaults", runspec.Limits{}, []rlimit{{"core", 0}, {"fsize", runspec.DefaultDiskBytes}, {"nproc", runspec.DefaultPids}}},
		{"pids", runspec.Limits{Pids: 64}, []rlimit{{"core", 0}, {"fsize", runspec.DefaultDiskBytes}, {"nproc", 64}}},
		{"nproc below pids", runspec.Limits{Pids: 64, Rlimits: runspec.Rlimits{"nproc": 10}}, []rlimit{{"core", 0}, {"fsize", runspec.DefaultDiskBytes}, {"nproc", 10}}},
		{"nproc above pids", runspec.Limits{Pids: 64, Rlimits: runspec.Rlimits{"nproc": 100}}, []rlimit{{"core", 0}, {"fsize", runspec.DefaultDiskBytes}, {"nproc", 64}}},
		{"core asked for", runspec.Limits{Rlimits: runspec.Rlimits{"core": runspec.Unlimited, "nofile": 9}},
			[]rlimit{{"core", runspec.Unlimited}, {"fsize", runspec.DefaultDiskBytes}, {"nofile", 9}, {"nproc", runspec.DefaultPids}}},
		{"fsize from disk", runspec.Limits{Disk: 64 << 20}, []rlimit{{"core", 0}, {"fsize", 64 << 20}, {"nproc", runspec.DefaultPids}}},
		{"fsize asked for", runspec.Limits{Disk: 64 << 20, Rlimits: runspec.Rlimits{"fsize": runspec.Unlimited}},
			[]rlimit{{"core", 0}, {"fsize", runspec.Unlimited}, {"nproc", runspec.DefaultPids}}},
	} {
		if got := rlimitsFor(c.l); !slices.Equal(got, c.want) {
			t.Errorf("%s: rlimitsFor = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestTmpSizes(t *testing.T) {
	if tmp, shm := tmpSizes(runspec.Limits{}); tmp != runspec.DefaultTmpBytes || shm != maxShmBytes {
		t.Errorf("defaults %d %d", tmp, shm)
	}
	if tmp, shm := tmpSizes(runspec.Limits{Tmp: 8 << 20}); tmp != 8<<20 || shm != 8<<20 {
		t.Errorf("small tmp %d %d", tmp, shm)
	}
}

func TestEtcFiles(t *testing.T) {
	e := etcFiles(1000, 1000, "/work/ws", chain.NetNone)
	for _, name := range []string{"passwd", "group", "hosts", "hostname", "resolv.conf", "nsswitch.conf"} {
		if e[name] == "" {
			t.Errorf("no %s", name)
		}
	}
	if !strings.Contains(e["passwd"], "agent:x:1000:1000:baton agent:/work/ws:/bin/sh\n") ||
		!strings.Contains(e["passwd"], "nobody:x:65534:") || !strings.Contains(e["group"], "agent:x:1000:\n") {
		t.Errorf("passwd %q group %q", e["passwd"], e["group"])
	}
	if strings.Contains(e["resolv.conf"], "nameserver") {
		t.Errorf("a sandbox without network names a resolver: %q", e["resolv.conf"])
	}
	if got := etcFiles(1000, 1000, "/ws", chain.NetProxy)["resolv.conf"]; !strings.Contains(got, "nameserver 127.0.0.1\n") {
		t.Errorf("resolv.conf with a network: %q", got)
	}
	// An agent that is nobody is listed once.
	if p := etcFiles(65534, 65534, "/ws", chain.NetNone)["passwd"]; strings.Count(p, ":65534:") != 1 {
		t.Errorf("passwd for nobody: %q", p)
	}
	for name := range e {
		if strings.Contains(name, "/") {
			t.Errorf("generated file %q is not a plain name", name)
		}
	}
}

func TestNftRuleset(t *testing.T) {
	rs := NftRuleset(
		[]netip.Prefix{netip.MustParsePrefix("10.213.7.0/30"), netip.MustParsePrefix("fd00:7::/64")},
		[]netip.Addr{netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::ffff:10.213.7.1"), netip.MustParseAddr("fe80::1%eth0")},
	)
	for _, want := range []string{
		"table inet baton {", "type filter hook output priority filter; policy drop;", "oifname \"lo\" accept",
		"ip daddr { 192.0.2.2, 10.213.7.1 } drop", "ip6 daddr { fe80::1 } drop",
		"ip daddr { 10.213.7.0/30 } accept", "ip6 daddr { fd00:7::/64 } accept", "nd-neighbor-solicit",
	} {
		if !strings.Contains(rs, want) {
			t.Errorf("ruleset lacks %q:\n%s", want, rs)
		}
	}
	// The host's addresses are dropped before any CIDR is accepted.
	if strings.Index(rs, "drop\n") > strings.Index(rs, "10.213.7.0/30") {
		t.Errorf("an accept precedes the host's drop:\n%s", rs)
	}
	if strings.Contains(rs, "127.0.0.1") {
		t.Errorf("loopback in the ruleset:\n%s", rs)
	}
	if strings.Count(rs, "{") != strings.Count(rs, "}") {
		t.Errorf("unbalanced braces:\n%s", rs)
	}
	none := NftRuleset(nil, nil)
	if strings.Contains(none, "daddr") || !strings.Contains(none, "policy drop") {
		t.Errorf("an empty ruleset:\n%s", none)
	}
}

func TestPastaArgs(t *testing.T) {
	args := strings.Join(pastaArgs(4242), " ")
	for _, want := range []string{"-t none", "-u none", "-T none", "-U none", "--no-map-gw", "--config-net", "--foreground"} {
		if !strings.Contains(args, want) {
			t.Errorf("pasta args %q lack %q", args, want)
		}
	}
	if !strings.HasSuffix(args, " 4242") {
		t.Errorf("pasta args %q do not end with the target pid", args)
	}
}

func TestCheckDests(t *testing.T) {
	ws := "/workspace"
	m := func(dest string) bindMount { return bindMount{Source: "/src", Dest: dest} }
	for _, c := range []struct {
		name   string
		mounts []bindMount
		binary string
		bad    string
	}{
		{"fine", []bindMount{m("/opt/tools"), m("/opt/tools/sub"), m("/srv/cache")}, "/var/lib/baton/bin/baton", ""},
		{"the workspace", []bindMount{m(ws)}, "", "overlaps " + ws},
		{"inside the workspace", []bindMount{m(ws + "/x")}, "", "overlaps " + ws},
		{"the home", []bindMount{m("/home/agent")}, "", "overlaps /home/agent"},
		{"above the home", []bindMount{m("/home")}, "", "overlaps /home/agent"},
		{"where the run directory is on the host", []bindMount{m("/var/lib/baton/runs/r1/workspace")}, "", ""},
		{"the binary", []bindMount{m("/opt/baton")}, "/opt/baton/baton", "overlaps /opt/baton/baton"},
		{"a generated /etc file", []bindMount{m("/etc/passwd")}, "", "overlaps /etc/passwd"},
		{"the CA certificates", []bindMount{m("/etc/ssl/certs")}, "", "overlaps /etc/ssl/certs"},
		{"another /etc file", []bindMount{m("/etc/gitconfig")}, "", ""},
		{"twice", []bindMount{m("/opt/x"), m("/opt/x")}, "", "two mounts land on /opt/x"},
	} {
		err := checkDests(c.mounts, c.binary)
		if c.bad == "" && err != nil || c.bad != "" && (err == nil || !strings.Contains(err.Error(), c.bad)) {
			t.Errorf("%s: checkDests = %v, want %q", c.name, err, c.bad)
		}
	}
}

func TestUnderOrAbove(t *testing.T) {
	runs := "/var/lib/baton/runs"
	for p, want := range map[string]bool{
		runs: true, runs + "/r1": true, "/var/lib/baton": true, "/var": true, "/": true,
		"/var/lib/baton/bin": false, "/var/lib/batonx": false, "/opt": false, "/var/lib/baton/runsx": false,
	} {
		if got := underOrAbove(p, runs); got != want {
			t.Errorf("underOrAbove(%s) = %v", p, got)
		}
	}
}

func TestDefaultRoute(t *testing.T) {
	v4 := "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
		"eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n" +
		"eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
	if !hasDefaultRoute4(v4) {
		t.Error("v4 default route not found")
	}
	for _, table := range []string{"", "Iface\tDestination\n", "eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n",
		"Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\n00000000\n"} {
		if hasDefaultRoute4(table) {
			t.Errorf("v4 default route found in %q", table)
		}
	}
	zero := strings.Repeat("0", 32)
	v6 := zero + " 00 " + zero + " 00 fd000000000000000000000000000001 00000400 00000001 00000000 00000003     eth0\n"
	unreachable := zero + " 00 " + zero + " 00 " + zero + " ffffffff 00000001 00000000 00200200       lo\n"
	if !hasDefaultRoute6(v6) || hasDefaultRoute6(unreachable) || hasDefaultRoute6("") || hasDefaultRoute6("garbage\n") {
		t.Error("v6 default route misread")
	}
}

func FuzzDefaultRoute(f *testing.F) {
	f.Add("eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n")
	f.Add(strings.Repeat("0", 32) + " 00 x y z 1 2 3 4 eth0\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, table string) {
		// Kernel text never crashes the reader, and a table without the
		// all-zero destination never has a default route.
		if hasDefaultRoute4(table) && !strings.Contains(table, "00000000") {
			t.Fatalf("default route in %q", table)
		}
		if hasDefaultRoute6(table) && !strings.Contains(table, strings.Repeat("0", 32)) {
			t.Fatalf("default route in %q", table)
		}
	})
}

func TestCgroupFiles(t *testing.T) {
	if got := cgroupFiles(runspec.Limits{}); len(got) != 1 || got["pids.max"] != "1024" {
		t.Errorf("defaults: %v", got)
	}
	got := cgroupFiles(runspec.Limits{Pids: 64, Memory: 512 << 20, CPUs: 1.5})
	want := map[string]string{"pids.max": "64", "memory.max": "536870912", "memory.swap.max": "0", "cpu.max": "150000 100000"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if c := cgroupControllers(got); !slices.Equal(c, []string{"cpu", "memory", "pids"}) {
		t.Errorf("controllers %q", c)
	}
	if got := cgroupFiles(runspec.Limits{CPUs: 0.001})["cpu.max"]; got != "1000 100000" {
		t.Errorf("a tiny cpu share: %q", got)
	}
	if needsCgroup(runspec.Limits{Pids: 5}) || !needsCgroup(runspec.Limits{Memory: 1 << 20}) || !needsCgroup(runspec.Limits{CPUs: 1}) {
		t.Error("needsCgroup")
	}
}

func validChild() childSpec {
	return childSpec{
		RunDir: "/var/lib/baton/runs/r1", Argv: []string{"claude"}, Env: []string{"PATH=/usr/bin"},
		AgentUID: 1000, AgentGID: 1000, Etc: map[string]string{"passwd": "x"},
		TmpBytes: 1 << 20, ShmBytes: 1 << 20, Rlimits: []rlimit{{"nproc", 5}},
	}
}

func TestDecodeChildSpec(t *testing.T) {
	good := validChild()
	if c, err := decodeChildSpec(chain.MustJSON(good)); err != nil || c.RunDir != good.RunDir {
		t.Fatalf("decodeChildSpec(good) = %+v, %v", c, err)
	}
	for name, mutate := range map[string]func(*childSpec){
		"relative run dir": func(c *childSpec) { c.RunDir = "runs/r1" },
		"no argv":          func(c *childSpec) { c.Argv = nil },
		"bad env":          func(c *childSpec) { c.Env = []string{"x"} },
		"root agent":       func(c *childSpec) { c.AgentUID = 0 },
		"relative binary":  func(c *childSpec) { c.Binary = "baton" },
		"mount onto /":     func(c *childSpec) { c.Mounts = []bindMount{{Source: "/x", Dest: "/"}} },
		"relative mount":   func(c *childSpec) { c.Mounts = []bindMount{{Source: "x", Dest: "/y"}} },
		"etc path":         func(c *childSpec) { c.Etc = map[string]string{"../shadow": ""} },
		"etc subdir":       func(c *childSpec) { c.Etc = map[string]string{"ssl/x": ""} },
		"no tmp size":      func(c *childSpec) { c.TmpBytes = 0 },
		"unknown rlimit":   func(c *childSpec) { c.Rlimits = []rlimit{{"files", 1}} },
	} {
		c := validChild()
		mutate(&c)
		if _, err := decodeChildSpec(chain.MustJSON(c)); !errors.Is(err, runspec.ErrInvalidSpec) {
			t.Errorf("%s: decodeChildSpec = %v, want ErrInvalidSpec", name, err)
		}
	}
	for _, raw := range []string{``, `{}`, `[]`, `{"runDir":1}`, string(chain.MustJSON(good)) + "{}", `{"nonce":"x"}`} {
		if _, err := decodeChildSpec([]byte(raw)); !errors.Is(err, runspec.ErrInvalidSpec) {
			t.Errorf("decodeChildSpec(%q) = %v", raw, err)
		}
	}
}

func TestDecodeInnerSpec(t *testing.T) {
	good := innerSpec{Child: validChild(), Net: netPlan{Mode: chain.NetPasta, Nft: "/usr/sbin/nft", Ruleset: "table inet baton {}"}}
	if _, err := decodeInnerSpec(chain.MustJSON(good)); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*innerSpec){
		"unknown mode":       func(s *innerSpec) { s.Net.Mode = "bridge" },
		"pasta without nft":  func(s *innerSpec) { s.Net.Nft = "" },
		"pasta relative nft": func(s *innerSpec) { s.Net.Nft = "nft" },
		"pasta, no ruleset":  func(s *innerSpec) { s.Net.Ruleset = "" },
		"bad child":          func(s *innerSpec) { s.Child.Argv = nil },
	} {
		s := good
		mutate(&s)
		if _, err := decodeInnerSpec(chain.MustJSON(s)); !errors.Is(err, runspec.ErrInvalidSpec) {
			t.Errorf("%s: decodeInnerSpec = %v", name, err)
		}
	}
}

func TestDecodeExecSpec(t *testing.T) {
	good := execSpec{Path: "/usr/bin/claude", Argv: []string{"claude"}, Env: []string{"A=b"}, Dir: "/ws", Rlimits: []rlimit{{"nofile", 9}}}
	if _, err := decodeExecSpec(chain.MustJSON(good)); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*execSpec){
		"relative path":  func(e *execSpec) { e.Path = "claude" },
		"relative dir":   func(e *execSpec) { e.Dir = "ws" },
		"no argv":        func(e *execSpec) { e.Argv = nil },
		"bad env":        func(e *execSpec) { e.Env = []string{"=x"} },
		"unknown rlimit": func(e *execSpec) { e.Rlimits = []rlimit{{"x", 1}} },
	} {
		e := good
		mutate(&e)
		if _, err := decodeExecSpec(chain.MustJSON(e)); !errors.Is(err, runspec.ErrInvalidSpec) {
			t.Errorf("%s: decodeExecSpec = %v", name, err)
		}
	}
}

func FuzzDecodeStageSpecs(f *testing.F) {
	f.Add(string(chain.MustJSON(innerSpec{Child: validChild(), Net: netPlan{Mode: chain.NetNone}})))
	f.Add(string(chain.MustJSON(validChild())))
	f.Add(string(chain.MustJSON(execSpec{Path: "/a", Argv: []string{"a"}, Dir: "/"})))
	f.Add(`{"child":{},"net":{"mode":"pasta"}}`)
	f.Fuzz(func(t *testing.T, in string) {
		// Whatever decodes passes its own validation: a stage acts on
		// nothing it would not have written.
		if s, err := decodeInnerSpec([]byte(in)); err == nil {
			if s.Child.validate() != nil || (s.Net.Mode != chain.NetNone && s.Net.Mode != chain.NetProxy && s.Net.Mode != chain.NetPasta) {
				t.Fatalf("accepted %+v", s)
			}
		}
		if c, err := decodeChildSpec([]byte(in)); err == nil && c.validate() != nil {
			t.Fatalf("accepted %+v", c)
		}
		if e, err := decodeExecSpec([]byte(in)); err == nil && (!runspec.CleanAbs(e.Path) || len(e.Argv) == 0) {
			t.Fatalf("accepted %+v", e)
		}
	})
}

func TestTunUsableBy(t *testing.T) {
	tests := []struct {
		name             string
		perm, owner, uid uint32
		want             bool
	}{
		{"root always", 0o600, 0, 0, true},
		{"0600 root-owned, other uid", 0o600, 0, 65534, false},
		{"0666", 0o666, 0, 65534, true},
		{"owned by uid", 0o600, 1000, 1000, true},
		{"owned by uid, read only", 0o400, 1000, 1000, false},
		{"others read only", 0o664, 0, 1000, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := TunUsableBy(tt.perm, tt.owner, tt.uid); got != tt.want {
				t.Fatalf("TunUsableBy(%o, %d, %d) = %v", tt.perm, tt.owner, tt.uid, got)
			}
		})
	}
}

func TestParseCgroupControllers(t *testing.T) {
	m := parseCgroupControllers("cpuset cpu io memory pids\n")
	if !m["memory"] || !m["pids"] || m["hugetlb"] {
		t.Fatalf("%v", m)
	}
}
