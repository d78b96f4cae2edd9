package config_test

import (
	"encoding/json"
	"math"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox/runspec"
)

func TestParseSandboxKeys(t *testing.T) {
	c, err := config.Parse([]byte(`
cgroupParent: /sys/fs/cgroup/baton/runs
profiles:
  x:
    command: [a]
    network:
      allow: [Test.Internal, .example.org, 10.213.7.0/30, "fd00:1::/64"]
      hosts: {TEST.internal: 10.213.7.2}
    mounts:
      - /opt/tools
      - {source: /srv/cache, target: /cache, writable: true}
    limits:
      pids: 64
      memory: 512MiB
      cpus: 1.5
      tmp: 64MiB
      rlimits: {nofile: 256, fsize: 1GiB, as: unlimited, core: 0}
      output: 1MiB
    agentUID: 1500
    agentGID: 1600
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.CgroupParent != "/sys/fs/cgroup/baton/runs" {
		t.Errorf("cgroupParent = %q", c.CgroupParent)
	}
	p := c.Profiles["x"]
	wantNet := config.Network{
		Allow: []string{"test.internal", ".example.org", "10.213.7.0/30", "fd00:1::/64"},
		Hosts: map[string]string{"test.internal": "10.213.7.2"},
	}
	if !reflect.DeepEqual(p.Network, wantNet) {
		t.Errorf("network = %+v, want %+v", p.Network, wantNet)
	}
	wantMounts := []config.Mount{{Source: "/opt/tools"}, {Source: "/srv/cache", Target: "/cache", Writable: true}}
	if !reflect.DeepEqual(p.Mounts, wantMounts) {
		t.Errorf("mounts = %+v", p.Mounts)
	}
	wantLimits := config.Limits{Pids: 64, Memory: 512 << 20, CPUs: 1.5, Tmp: 64 << 20,
		Rlimits: config.Rlimits{"nofile": 256, "fsize": 1 << 30, "as": config.Unlimited, "core": 0}, Output: 1 << 20}
	if !reflect.DeepEqual(p.Limits, wantLimits) {
		t.Errorf("limits = %+v, want %+v", p.Limits, wantLimits)
	}
	if p.AgentUID != 1500 || p.AgentGID != 1600 {
		t.Errorf("agent ids %d/%d", p.AgentUID, p.AgentGID)
	}
	if got := runspec.Network(p.Network).Names(); !reflect.DeepEqual(got, []string{"test.internal", ".example.org"}) {
		t.Errorf("Names = %q", got)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.213.7.0/30"), netip.MustParsePrefix("fd00:1::/64")}
	if got := runspec.Network(p.Network).Prefixes(); !reflect.DeepEqual(got, want) {
		t.Errorf("Prefixes = %v", got)
	}

	inv, err := c.Resolve(protocol.Job{RunID: "r", Profile: "x"}, "/b")
	if err != nil {
		t.Fatal(err)
	}
	specMounts := []runspec.Mount{runspec.Mount(wantMounts[0]), runspec.Mount(wantMounts[1])}
	if !reflect.DeepEqual(inv.Network, runspec.Network(wantNet)) || !reflect.DeepEqual(inv.Mounts, specMounts) ||
		!reflect.DeepEqual(inv.Limits, wantLimits.Spec()) || inv.AgentUID != 1500 || inv.AgentGID != 1600 {
		t.Fatalf("invocation = %+v", inv)
	}
	// Nothing of the invocation is shared with the configuration.
	inv.Network.Hosts["test.internal"] = "10.0.0.9"
	inv.Mounts[0].Source = "/etc"
	inv.Limits.Rlimits["nofile"] = 1
	if p := c.Profiles["x"]; p.Network.Hosts["test.internal"] != "10.213.7.2" || p.Mounts[0].Source != "/opt/tools" || p.Limits.Rlimits["nofile"] != 256 {
		t.Fatal("Resolve shares maps or slices with the configuration")
	}
}

func TestParseRejectsSandboxKeys(t *testing.T) {
	profile := func(body string) string { return "profiles:\n  x:\n    command: [a]\n" + body }
	cases := []struct {
		name, doc string
		want      string
	}{
		{"cgroup relative", "cgroupParent: sys/fs/cgroup\n", `cgroupParent: "sys/fs/cgroup" must be an absolute, clean path`},
		{"bare IP", profile("    network: {allow: [10.0.0.1]}\n"), `"10.0.0.1" is an IP address; allow it as a CIDR prefix like 10.0.0.1/32`},
		{"CIDR host bits", profile("    network: {allow: [10.0.0.1/8]}\n"), `"10.0.0.1/8" has host bits set; write it as 10.0.0.0/8`},
		{"CIDR loopback", profile("    network: {allow: [127.0.0.0/8]}\n"), `covers 127.0.0.0/8`},
		{"CIDR everything", profile("    network: {allow: [0.0.0.0/0]}\n"), `covers 0.0.0.0/8`},
		{"CIDR v6 everything", profile("    network: {allow: ['::/0']}\n"), `covers ::/96`},
		{"CIDR v4-compatible", profile("    network: {allow: ['::a00:0/104']}\n"), `covers ::/96`},
		{"CIDR bad length", profile("    network: {allow: [10.0.0.0/33]}\n"), `"10.0.0.0/33" is not a CIDR prefix`},
		{"CIDR mapped", profile("    network: {allow: ['::ffff:10.0.0.0/104']}\n"), `write IPv4 prefixes in dotted form`},
		{"hosts not allowed", profile("    network: {allow: [a.com], hosts: {b.com: 10.0.0.1}}\n"), `profiles.x.network.hosts.b.com: the name is not on the allowlist`},
		{"hosts bad address", profile("    network: {allow: [a.com], hosts: {a.com: nope}}\n"), `hosts.a.com: "nope" is not an IP address`},
		{"hosts loopback", profile("    network: {allow: [a.com], hosts: {a.com: 127.0.0.1}}\n"), `hosts.a.com: 127.0.0.1 is a loopback`},
		{"hosts suffix key", profile("    network: {allow: [.a.com], hosts: {.a.com: 10.0.0.1}}\n"), `hosts: ".a.com" is not a host name`},
		{"hosts list", profile("    network: {allow: [a.com], hosts: [a.com]}\n"), `network.hosts must map host names to addresses`},
		{"hosts twice", profile("    network: {allow: [a.com], hosts: {a.com: 10.0.0.1, A.com: 10.0.0.2}}\n"), `names "a.com" twice`},
		{"mount relative", profile("    mounts: [opt/tools]\n"), `profiles.x.mounts[0]: "opt/tools" must be an absolute, clean path`},
		{"mount unclean", profile("    mounts: [/opt/../etc]\n"), `must be an absolute, clean path`},
		{"mount root", profile("    mounts: [/]\n"), `target / is the sandbox's own`},
		{"mount over etc", profile("    mounts: [{source: /srv/etc, target: /etc}]\n"), `target /etc is the sandbox's own`},
		{"mount under usr", profile("    mounts: [/usr/local/bin]\n"), `target /usr/local/bin is under /usr`},
		{"mount under proc", profile("    mounts: [{source: /x, target: /proc/sys}]\n"), `is under /proc`},
		{"mount no source", profile("    mounts: [{target: /x}]\n"), `source must not be empty`},
		{"mount unknown key", profile("    mounts: [{source: /x, mode: rw}]\n"), `unknown key "mode" in a mount`},
		{"mount writable string", profile("    mounts: [{source: /x, writable: yes please}]\n"), `mount writable must be true or false`},
		{"mount list", profile("    mounts: /opt\n"), `want a list of mounts`},
		{"mount number", profile("    mounts: [1]\n"), `a mount is a path or {source`},
		{"limits unknown", profile("    limits: {procs: 3}\n"), `unknown key "procs" in limits (known keys: pids, memory, cpus, tmp, disk, rlimits`},
		{"limits negative pids", profile("    limits: {pids: -1}\n"), `profiles.x.limits.pids: -1 is out of range`},
		{"limits fractional pids", profile("    limits: {pids: 1.5}\n"), `want an integer, got 1.5`},
		{"limits bad size", profile("    limits: {memory: 2GB}\n"), `"2GB" is not a size like 512MiB`},
		{"limits tiny tmp", profile("    limits: {tmp: 1000}\n"), `limits.tmp: 1000 bytes is below 1MiB`},
		{"limits tiny disk", profile("    limits: {disk: 1MiB}\n"), `limits.disk: 1048576 bytes is out of range 16MiB..16TiB`},
		{"limits huge disk", profile("    limits: {disk: 17TiB}\n"), `limits.disk: 18691697672192 bytes is out of range`},
		{"limits tiny output", profile("    limits: {output: 100}\n"), `limits.output: 100 bytes is below 4KiB`},
		{"limits cpus", profile("    limits: {cpus: -2}\n"), `limits.cpus: -2 is not a number of cores`},
		{"limits cpus word", profile("    limits: {cpus: many}\n"), `want a number`},
		{"rlimit unknown", profile("    limits: {rlimits: {files: 3}}\n"), `limits.rlimits: unknown limit "files"`},
		{"rlimit bad value", profile("    limits: {rlimits: {nofile: lots}}\n"), `want an integer, a size like 1GiB, or unlimited`},
		{"rlimit negative", profile("    limits: {rlimits: {nofile: -1}}\n"), `want an integer, a size like 1GiB, or unlimited`},
		{"agent uid", profile("    agentUID: -3\n"), `profiles.x.agentUID: -3 is not an id`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Parse([]byte(tc.doc))
			if err == nil {
				t.Fatalf("accepted:\n%s\nas %+v", tc.doc, c.Profiles["x"])
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error\n%s\ndoes not contain\n%s", err, tc.want)
			}
		})
	}
}

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]config.ByteSize{
		"0": 0, "1": 1, "512": 512, "1KiB": 1 << 10, "64MiB": 64 << 20, "2GiB": 2 << 30, "1TiB": 1 << 40,
		"10B": 10, " 3 MiB ": 3 << 20, "18446744073709551615": math.MaxUint64,
	} {
		if got, err := config.ParseByteSize(in); err != nil || got != want {
			t.Errorf("ParseByteSize(%q) = %d, %v, want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "-1", "+1", "1.5GiB", "1GB", "1 mb", "0x10", "16777216TiB", "18446744073709551616", "1e9"} {
		if got, err := config.ParseByteSize(in); err == nil {
			t.Errorf("ParseByteSize(%q) = %d, want an error", in, got)
		}
	}
}

func FuzzParseByteSize(f *testing.F) {
	for _, s := range []string{"0", "64MiB", "1TiB", "-1", "1.5GiB", "99999999999999999999", "7B"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := config.ParseByteSize(s)
		if err != nil {
			return
		}
		// Whatever parses is a plain count of bytes, printed back as is.
		back, err := config.ParseByteSize(strings.TrimSpace(formatBytes(uint64(v))))
		if err != nil || back != v {
			t.Fatalf("%q -> %d -> %d, %v", s, v, back, err)
		}
	})
}

func formatBytes(v uint64) string {
	b, _ := json.Marshal(v)
	return string(b)
}
