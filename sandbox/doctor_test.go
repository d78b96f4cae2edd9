package sandbox

import (
	"strings"
	"testing"
)

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
			if got := tunUsableBy(tt.perm, tt.owner, tt.uid); got != tt.want {
				t.Fatalf("tunUsableBy(%o, %d, %d) = %v", tt.perm, tt.owner, tt.uid, got)
			}
		})
	}
}

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

func TestParseCgroupControllers(t *testing.T) {
	m := parseCgroupControllers("cpuset cpu io memory pids\n")
	if !m["memory"] || !m["pids"] || m["hugetlb"] {
		t.Fatalf("%v", m)
	}
}

// TestDoctorOnThisMachine runs the real checks: user namespaces must work
// here, or no run can start.
func TestDoctorOnThisMachine(t *testing.T) {
	checks := Doctor(DoctorOptions{SandboxUID: 65534})
	for _, c := range checks {
		if c.Name == "user namespaces" && c.Severity != SevOK {
			t.Fatalf("user namespaces unavailable: %s (fix: %s)", c.Detail, c.Fix)
		}
	}
	t.Logf("\n%s", Report(checks))
}
