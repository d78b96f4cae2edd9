package tenancy_test

import (
	"testing"

	"github.com/batonhq/baton/tenancy"
)

// serve runs n rounds: each serves the first key of the order among those
// with jobs left, and returns who was served, in order.
func serve(f *tenancy.Fair, waiting map[string]int, weights map[string]int, n int) []string {
	var got []string
	for range n {
		var keys []string
		for k, left := range waiting {
			if left > 0 {
				keys = append(keys, k)
			}
		}
		if len(keys) == 0 {
			break
		}
		k := f.Order(keys)[0]
		waiting[k]--
		f.Served(k, weights[k])
		got = append(got, k)
	}
	return got
}

func TestFairOneJobBehindABacklog(t *testing.T) {
	f := tenancy.NewFair()
	waiting := map[string]int{"big": 1000}
	if got := serve(f, waiting, nil, 10); len(got) != 10 {
		t.Fatalf("served %v", got)
	}
	waiting["small"] = 1
	if got := serve(f, waiting, nil, 1); got[0] != "small" {
		t.Fatalf("the small key's one job came after %v", got)
	}
}

func TestFairWeights(t *testing.T) {
	f := tenancy.NewFair()
	waiting := map[string]int{"a": 100, "b": 100, "c": 100}
	got := serve(f, waiting, map[string]int{"a": 3}, 50)
	count := map[string]int{}
	for _, k := range got {
		count[k]++
	}
	// a: 3/5 of the slots, b and c 1/5 each (within one round).
	if count["a"] < 29 || count["a"] > 31 || count["b"] < 9 || count["b"] > 11 || count["c"] < 9 || count["c"] > 11 {
		t.Fatalf("shares %v, want a 30, b 10, c 10", count)
	}
}

func TestFairNoSavedCredit(t *testing.T) {
	f := tenancy.NewFair()
	waiting := map[string]int{"a": 100, "b": 1}
	serve(f, waiting, nil, 2) // b's one job, then a
	serve(f, waiting, nil, 20)
	// b comes back after 20 of a's: it is served next, then they alternate,
	// not b twenty times for the turns it missed.
	waiting["b"] = 10
	got := serve(f, waiting, nil, 6)
	want := []string{"b", "a", "b", "a", "b", "a"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("served %v, want %v", got, want)
		}
	}
}
