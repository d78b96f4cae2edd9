package stage

import (
	"fmt"
	"sync"

	"github.com/batonhq/baton/journal"
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

// egressRecords returns OnDone's function for the run's egress proxy: it
// inserts an egress record in the journal for each outcome (insert is the
// journal writer's Insert), between the agent's lines, at most limit of
// them, then one whose note says further egress is not recorded: a
// looping agent opening connection after connection cannot flood the
// journal, nor the chain published from it. A record the journal cannot
// take is noted in st.
func egressRecords(insert func(line []byte) error, nonce string, limit int, st *state) func(egress.Outcome) {
	var (
		mu sync.Mutex
		n  int
	)
	return func(o egress.Outcome) {
		mu.Lock()
		defer mu.Unlock()
		var e journal.Egress
		switch n++; {
		case n <= limit:
			e = journal.Egress{Start: o.Start.UTC(), Host: o.Host, Port: o.Port, Method: o.Method, Allowed: o.Allowed, Reason: o.Reason,
				Secret: o.Secret, BytesOut: o.BytesOut, BytesIn: o.BytesIn, DurationMs: o.Duration.Milliseconds()}
		case n == limit+1:
			e = journal.Egress{Note: journal.EgressNoteLimit}
		default:
			return
		}
		if err := insert(journal.EgressRecord{Egress: e, Nonce: nonce}.Line()); err != nil {
			st.fail("egress-record", err)
		}
	}
}
