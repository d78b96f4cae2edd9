package config

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/batonhq/baton/protocol"
)

// Tenancy is how the cluster shares its workers between concurrency keys
// (tenants, users): a key's limit of runs at once across every worker, and
// its weight in the round-robin of free slots. A worker reads it again on
// SIGHUP, so limits change without a restart.
type Tenancy struct {
	// TenantLabel names the job label whose value is a job's concurrency
	// key when the job sets no concurrencyKey ("" : only concurrencyKey).
	TenantLabel string `yaml:"tenantLabel"`
	// KeyConcurrency bounds the runs of one key across the cluster.
	KeyConcurrency KeyConcurrency `yaml:"keyConcurrency"`
	// KeyWeights are keys' shares of the free slots when several keys
	// have jobs waiting (default 1 each): a key of weight 3 gets three
	// slots for another's one.
	KeyWeights map[string]int `yaml:"keyWeights"`
}

// KeyConcurrency is the number of runs a key may have at once across the
// cluster: Keys' own, else Default (0: no limit).
type KeyConcurrency struct {
	Default int            `yaml:"default"`
	Keys    map[string]int `yaml:"keys"`
}

// Bounds of the tenancy settings.
const (
	maxKeyConcurrency = 10_000
	maxKeyWeight      = 1000
)

// KeyOf is the job's concurrency key: its concurrencyKey, else the value of
// its TenantLabel label, else "" (the job has no key: it is limited by no
// key and taken in arrival order). A label value that cannot be a key is
// an error wrapping protocol.ErrInvalidJob.
func (t Tenancy) KeyOf(j protocol.Job) (string, error) {
	if j.ConcurrencyKey != "" || t.TenantLabel == "" {
		return j.ConcurrencyKey, nil
	}
	v, ok := j.Labels[t.TenantLabel]
	if !ok {
		return "", nil
	}
	if !protocol.ValidConcurrencyKey(v) {
		return "", fmt.Errorf("%w: label %q (the tenantLabel) is %q; as a concurrency key it must match [A-Za-z0-9_-]{1,64}",
			protocol.ErrInvalidJob, t.TenantLabel, v)
	}
	return v, nil
}

// Limit is key's limit of runs at once across the cluster, 0 for none.
func (t Tenancy) Limit(key string) int {
	if n, ok := t.KeyConcurrency.Keys[key]; ok {
		return n
	}
	return t.KeyConcurrency.Default
}

// Weight is key's share of free slots, at least 1.
func (t Tenancy) Weight(key string) int {
	if w := t.KeyWeights[key]; w > 0 {
		return w
	}
	return 1
}

func (t *Tenancy) validate(bad func(path, format string, args ...any)) {
	if l := t.TenantLabel; len(l) > protocol.MaxLabelKeyBytes || strings.HasPrefix(strings.ToLower(l), protocol.ReservedLabelPrefix) ||
		strings.ContainsFunc(l, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		bad("tenantLabel", "%q is not a label name a job can carry (at most %d bytes, no control characters, not %q…)",
			l, protocol.MaxLabelKeyBytes, protocol.ReservedLabelPrefix)
	}
	if n := t.KeyConcurrency.Default; n < 0 || n > maxKeyConcurrency {
		bad("keyConcurrency.default", "%d is out of range 0..%d (0: no limit)", n, maxKeyConcurrency)
	}
	for _, k := range slices.Sorted(maps.Keys(t.KeyConcurrency.Keys)) {
		if !protocol.ValidConcurrencyKey(k) {
			bad("keyConcurrency.keys", "%q is not a concurrency key ([A-Za-z0-9_-]{1,64})", k)
		}
		if n := t.KeyConcurrency.Keys[k]; n < 0 || n > maxKeyConcurrency {
			bad("keyConcurrency.keys."+k, "%d is out of range 0..%d (0: no limit)", n, maxKeyConcurrency)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(t.KeyWeights)) {
		if !protocol.ValidConcurrencyKey(k) {
			bad("keyWeights", "%q is not a concurrency key ([A-Za-z0-9_-]{1,64})", k)
		}
		if w := t.KeyWeights[k]; w < 1 || w > maxKeyWeight {
			bad("keyWeights."+k, "%d is out of range 1..%d", w, maxKeyWeight)
		}
	}
}

// ChangedKeys names the top-level keys whose values differ between c and
// next, the tenancy's aside: what a reload cannot apply without a restart.
func (c *Config) ChangedKeys(next *Config) []string {
	a, b := *c, *next
	a.Tenancy, b.Tenancy = Tenancy{}, Tenancy{}
	av, bv := reflect.ValueOf(a), reflect.ValueOf(b)
	var keys []string
	for i := range av.NumField() {
		f := av.Type().Field(i)
		if f.Anonymous || reflect.DeepEqual(av.Field(i).Interface(), bv.Field(i).Interface()) {
			continue
		}
		keys = append(keys, strings.Split(f.Tag.Get("yaml"), ",")[0])
	}
	return keys
}
