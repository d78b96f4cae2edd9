package stage

import (
	"fmt"
	"sync"

	"github.com/batonhq/baton/sandbox/internal/egress"
)

// Statuses of state.ndjson records.
const (
	stateOK      = "ok"
	stateError   = "error"
	stateRefused = "refused" // a request the egress proxy or DNS stub refused or could not serve
)

// egressNotes records the egress proxy's and DNS stub's refusals in st as
// "egress" records of status "refused" (not "ok": the run is fine, the
// request was not), at most limit of them, then one note that further
// refusals go unrecorded: a looping agent cannot fill the disk with them.
func egressNotes(st *state, limit int) egress.Logf {
	var (
		mu    sync.Mutex
		notes int
	)
	return func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if notes++; notes < limit {
			st.record("egress", stateRefused, fmt.Sprintf(format, args...))
		} else if notes == limit {
			st.ok("egress", "further refusals are not recorded")
		}
	}
}
