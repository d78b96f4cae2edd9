package sandbox

import (
	"fmt"
	"strings"
)

// Severity of a failed prerequisite.
type Severity string

const (
	SevOK   Severity = "ok"
	SevWarn Severity = "warn" // some profiles cannot run; the rest can
	SevFail Severity = "FAIL" // no run can start
)

// Check is one prerequisite and what to do when it is missing.
type Check struct {
	Name     string
	Severity Severity
	Detail   string
	Fix      string
}

// DoctorOptions say what the checks are for.
type DoctorOptions struct {
	// SandboxUID is the uid a root worker runs sandboxes as.
	SandboxUID int
	// CgroupParent is the configured delegated cgroup v2 directory, if any.
	CgroupParent string
	// StateDir is the worker's state directory; "" skips its check.
	StateDir string
}

// Report renders checks as a table with a fix under each failure.
func Report(checks []Check) string {
	var b strings.Builder
	width := 0
	for _, c := range checks {
		width = max(width, len(c.Name))
	}
	for _, c := range checks {
		fmt.Fprintf(&b, "%-4s  %-*s  %s\n", c.Severity, width, c.Name, c.Detail)
		if c.Severity != SevOK && c.Fix != "" {
			fmt.Fprintf(&b, "      %*s  fix: %s\n", width, "", c.Fix)
		}
	}
	return b.String()
}

// Failed reports whether any check makes runs impossible.
func Failed(checks []Check) bool {
	for _, c := range checks {
		if c.Severity == SevFail {
			return true
		}
	}
	return false
}

// searchableBy reports whether a directory of mode perm, owned by owner
// and group, can be searched (traversed) by uid with primary group gid
// and no supplementary groups, as the sandbox uid runs.
func searchableBy(perm, owner, group, uid, gid uint32) bool {
	switch {
	case uid == 0:
		return true
	case owner == uid:
		return perm&0o100 != 0
	case group == gid:
		return perm&0o010 != 0
	}
	return perm&0o001 != 0
}
