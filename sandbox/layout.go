package sandbox

import (
	"path/filepath"
	"strings"
)

// hiddenTop is the directory runner-inner-child covers with a tmpfs so
// the agent sees its workspace and nothing else of the node's state: the
// run directory's parent (other runs, and this run's journal, spec and
// lock), or the first ancestor the sandbox uid cannot search if that is
// higher, since the workspace must be reachable by its path.
// searchable reports whether the sandbox uid may search a directory.
func hiddenTop(runDir string, searchable func(string) bool) string {
	parent := filepath.Dir(runDir)
	p := ""
	for _, part := range strings.Split(strings.TrimPrefix(parent, "/"), "/") {
		p += "/" + part
		if p == parent {
			break
		}
		if !searchable(p) {
			return p
		}
	}
	return parent
}
