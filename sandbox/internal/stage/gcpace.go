package stage

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// A stage lives as long as its run and mostly waits. The Go runtime
// collects any heap left uncollected for two minutes (its forced GC), so
// each stage process of each idle run woke every two minutes to mark and
// sweep a heap of a few hundred KiB: the two wait stages of 200 idle
// runs spent 2.0 % of a core, and 0.23 % without it, the runtime's
// monitor waking once a minute (docs/benchmarks-log.md, "Cold start, the
// adaptive pool, and what wakes for an idle run"). The runtime forces no
// collection while GOGC is off, so
// the stages run with it off and a memory limit doing its pacing: set
// after each collection to gcFloor plus twice the live heap, it starts
// the next one about where GOGC=100 would (twice the live heap, with
// room for the runtime's own memory, which the limit counts), and it
// grows with a busy stage's live heap, so collections do not come back
// to back. The next collection re-paces from a finalizer, which runs
// only after a collection: nothing wakes a stage that allocates nothing.

// gcFloor is the limit's part beside the live heap: the runtime's own
// memory (stacks, spans, GC metadata, about 2-3 MiB in a stage) and the
// 4 MiB a heap grows to before GOGC=100 collects it at all.
const gcFloor = 8 << 20

// paceGC turns the forced collections off and paces collections on the
// memory limit, for the life of the process. At a stage's start nothing
// is live beside its packages' init (tens of KiB), so the first limit is
// the floor alone: reading the live heap would make the runtime build
// its metrics table (about 19 KiB and 8 page faults), in every stage
// process, most of which never collect.
func paceGC() {
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(gcFloor)
	repaceAfterGC()
}

// gcSentinel's finalizer runs once the collection after its allocation
// is done; it holds a pointer so that it is not in the tiny allocator,
// whose objects' finalizers may never run.
type gcSentinel struct{ _ *int }

func repaceGC() {
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live)
	var heap uint64
	if live[0].Value.Kind() == metrics.KindUint64 {
		heap = live[0].Value.Uint64()
	}
	debug.SetMemoryLimit(int64(gcFloor + 2*heap))
	repaceAfterGC()
}

// repaceAfterGC has the next collection call repaceGC.
func repaceAfterGC() {
	runtime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) { repaceGC() })
}
