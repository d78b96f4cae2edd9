package stage

import (
	"fmt"
	"strconv"
	"strings"
)

// parseTasks reads the thread ids of a /proc/<pid>/task listing.
func parseTasks(names []string) ([]int, error) {
	tids := make([]int, 0, len(names))
	for _, n := range names {
		tid, err := strconv.Atoi(n)
		if err != nil || tid <= 0 {
			return nil, fmt.Errorf("task %q is not a thread id", n)
		}
		tids = append(tids, tid)
	}
	return tids, nil
}

// parseAutogroupNice reads the nice value of a /proc/<pid>/autogroup
// line, "/autogroup-<n> nice <nice>"; ok is false for anything else (the
// kernel's default group reads empty).
func parseAutogroupNice(s string) (nice int, ok bool) {
	f := strings.Fields(s)
	if len(f) != 3 || !strings.HasPrefix(f[0], "/autogroup-") || f[1] != "nice" {
		return 0, false
	}
	n, err := strconv.Atoi(f[2])
	if err != nil || n < -20 || n > 19 {
		return 0, false
	}
	return n, true
}
