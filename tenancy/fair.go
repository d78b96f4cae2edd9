package tenancy

import (
	"cmp"
	"slices"
)

// Fair orders keys for the next free slot: weighted fair queueing over
// the keys that have jobs waiting. Each key has a virtual time that a
// served job advances by 1/weight; the key with the least goes first, so a
// key of weight 3 is served three times for another's once, and a key
// that has just come (or come back) starts at the least virtual time of
// the others, never with credit saved while it had nothing waiting. Ties
// go to the key served least recently, so a key with one job waiting
// behind another's thousand is the next served. Fair is one worker's: the
// workers of a cluster each share their own slots so. Not safe for
// concurrent use.
type Fair struct {
	vt   map[string]float64
	last map[string]uint64
	seq  uint64
}

// NewFair returns a Fair with no history.
func NewFair() *Fair { return &Fair{vt: map[string]float64{}, last: map[string]uint64{}} }

// Order sorts keys (those with jobs waiting) in the order they should be
// served, and forgets the keys not among them.
func (f *Fair) Order(keys []string) []string {
	floor, any := 0.0, false
	for _, k := range keys {
		if v, ok := f.vt[k]; ok && (!any || v < floor) {
			floor, any = v, true
		}
	}
	for k := range f.vt {
		if !slices.Contains(keys, k) {
			delete(f.vt, k)
			delete(f.last, k)
		}
	}
	for _, k := range keys {
		if v, ok := f.vt[k]; !ok || v < floor {
			f.vt[k] = floor
		}
	}
	out := slices.Clone(keys)
	slices.SortFunc(out, func(a, b string) int {
		return cmp.Or(cmp.Compare(f.vt[a], f.vt[b]), cmp.Compare(f.last[a], f.last[b]), cmp.Compare(a, b))
	})
	return out
}

// Served records that key, of weight w (at least 1), got a slot.
func (f *Fair) Served(key string, w int) {
	f.seq++
	f.last[key] = f.seq
	f.vt[key] += 1 / float64(max(w, 1))
}
