package bench

import (
	"slices"
	"time"
)

// quantile is the q-quantile (0..1) of ds by the nearest-rank method; 0
// for none. It sorts ds.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(q*float64(len(ds))+0.999999999) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

// median is quantile(ds, 0.5).
func median(ds []time.Duration) time.Duration { return quantile(ds, 0.5) }
