package sandbox

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func TestReport(t *testing.T) {
	checks := []Check{
		{Name: "a", Severity: SevOK, Detail: "fine"},
		{Name: "bbb", Severity: SevFail, Detail: "broken", Fix: "do this"},
	}
	out := Report(checks)
	if !strings.Contains(out, "FAIL  bbb  broken") || !strings.Contains(out, "fix: do this") || strings.Contains(out, "fix: \n") {
		t.Fatalf("report:\n%s", out)
	}
	if !Failed(checks) || Failed(checks[:1]) {
		t.Fatal("Failed")
	}
}

// TestDoctorOnThisMachine runs the real checks: what every run needs must
// be here (the sandbox tests run), and the cgroup check must tell this
// machine's hierarchy as it is.
func TestDoctorOnThisMachine(t *testing.T) {
	checks := Doctor(DoctorOptions{SandboxUID: 65534})
	t.Logf("\n%s", Report(checks))
	by := map[string]Check{}
	for _, c := range checks {
		by[c.Name] = c
		if c.Severity != SevOK && c.Fix == "" {
			t.Errorf("%s is %s without a fix", c.Name, c.Severity)
		}
	}
	if Failed(checks) {
		t.Fatal("doctor says no run can start here, yet the sandbox tests run")
	}
	want := []string{"user namespaces", "kernel mount API", "seccomp", "pasta", "nft"}
	if os.Geteuid() == 0 {
		want = append(want, "disk bound")
	}
	for _, name := range want {
		if by[name].Severity != SevOK {
			t.Errorf("%s: %s %s (fix: %s)", name, by[name].Severity, by[name].Detail, by[name].Fix)
		}
	}
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	cg := by["cgroup v2 delegation"]
	if v1 := err != nil; v1 && (cg.Severity != SevWarn || !strings.Contains(cg.Detail, "cgroup v1")) {
		t.Errorf("on a cgroup v1 machine the cgroup check says %s %q", cg.Severity, cg.Detail)
	}
	// A configured parent that is no cgroup v2 directory is reported.
	checks = Doctor(DoctorOptions{SandboxUID: 65534, CgroupParent: t.TempDir()})
	for _, c := range checks {
		if c.Name == "cgroup v2 delegation" && (c.Severity != SevWarn || !strings.Contains(c.Detail, "not a cgroup v2 directory")) {
			t.Errorf("a plain directory as cgroupParent: %s %q", c.Severity, c.Detail)
		}
	}
}

func TestMissingFlags(t *testing.T) {
	help := "  --no-map-gw\t\tDon't map\n  --no-dhcpv6\t\tDisable\n  -t, --tcp-ports SPEC\n  --config-net\n"
	got := missingFlags(help, []string{"--no-map-gw", "--no-dhcp", "--no-dhcpv6", "--tcp-ports", "--tcp", "--config-net", "--quiet"})
	if want := []string{"--no-dhcp", "--tcp", "--quiet"}; !slices.Equal(got, want) {
		t.Errorf("missingFlags = %q, want %q", got, want)
	}
}

func TestSearchableBy(t *testing.T) {
	for _, tt := range []struct {
		name                         string
		perm, owner, group, uid, gid uint32
		want                         bool
	}{
		{"root", 0o700, 1, 1, 0, 0, true},
		{"others x", 0o711, 0, 0, 65534, 65534, true},
		{"0700 root's", 0o700, 0, 0, 65534, 65534, false},
		{"others r only", 0o754, 0, 0, 65534, 65534, false},
		{"own, u+x", 0o700, 65534, 0, 65534, 65534, true},
		{"own, no u+x though o+x", 0o601, 65534, 0, 65534, 65534, false},
		{"group x", 0o710, 0, 65534, 65534, 65534, true},
		{"group, no g+x though o+x", 0o701, 0, 65534, 65534, 65534, false},
	} {
		if got := searchableBy(tt.perm, tt.owner, tt.group, tt.uid, tt.gid); got != tt.want {
			t.Errorf("%s: searchableBy(%o, %d, %d, %d, %d) = %v", tt.name, tt.perm, tt.owner, tt.group, tt.uid, tt.gid, got)
		}
	}
}
