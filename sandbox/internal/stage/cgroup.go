package stage

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/batonhq/baton/sandbox/runspec"
)

// cpuPeriod is the cpu.max period, in microseconds.
const cpuPeriod = 100000

// needsCgroup reports whether limits ask for what only a cgroup enforces.
func needsCgroup(l runspec.Limits) bool { return l.Memory > 0 || l.CPUs > 0 }

// cgroupFiles are the interface files of a run's cgroup v2 and their
// contents: memory.max (and no swap) and cpu.max when the profile sets
// them, and pids.max always.
func cgroupFiles(l runspec.Limits) map[string]string {
	pids := l.Pids
	if pids == 0 {
		pids = runspec.DefaultPids
	}
	m := map[string]string{"pids.max": strconv.Itoa(pids)}
	if l.Memory > 0 {
		m["memory.max"] = strconv.FormatUint(uint64(l.Memory), 10)
		m["memory.swap.max"] = "0"
	}
	if l.CPUs > 0 {
		m["cpu.max"] = fmt.Sprintf("%d %d", max(int64(l.CPUs*cpuPeriod), 1000), cpuPeriod)
	}
	return m
}

// cgroupControllers are the controllers files needs, sorted.
func cgroupControllers(files map[string]string) []string {
	set := map[string]bool{}
	for name := range files {
		c, _, _ := strings.Cut(name, ".")
		set[c] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// runCgroupName is the run's cgroup under the parent.
func runCgroupName(runID string) string { return "baton-" + runID }

// parseCgroupControllers reads the enabled controllers of a cgroup v2
// cgroup.controllers or cgroup.subtree_control file.
func parseCgroupControllers(s string) map[string]bool {
	m := map[string]bool{}
	for _, f := range strings.Fields(s) {
		m[f] = true
	}
	return m
}
