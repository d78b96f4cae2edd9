package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/protocol"
)

func TestTenancyParses(t *testing.T) {
	c, err := config.Parse([]byte("tenantLabel: tenant\nkeyConcurrency: {default: 2, keys: {acme: 10, free: 0}}\nkeyWeights: {acme: 3}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key           string
		limit, weight int
	}{{"acme", 10, 3}, {"free", 0, 1}, {"bolt", 2, 1}, {"", 2, 1}} {
		if l, w := c.Limit(tc.key), c.Weight(tc.key); l != tc.limit || w != tc.weight {
			t.Errorf("key %q: limit %d weight %d, want %d %d", tc.key, l, w, tc.limit, tc.weight)
		}
	}
}

func TestTenancyRejects(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"negative default", "keyConcurrency: {default: -1}\n", "keyConcurrency.default: -1 is out of range 0..10000"},
		{"bad key", "keyConcurrency: {keys: {a.b: 1}}\n", `keyConcurrency.keys: "a.b" is not a concurrency key`},
		{"huge limit", "keyConcurrency: {keys: {a: 10001}}\n", "keyConcurrency.keys.a: 10001 is out of range"},
		{"zero weight", "keyWeights: {a: 0}\n", "keyWeights.a: 0 is out of range 1..1000"},
		{"weight key", "keyWeights: {'a b': 2}\n", `keyWeights: "a b" is not a concurrency key`},
		{"reserved label", "tenantLabel: baton.tenant\n", `tenantLabel: "baton.tenant" is not a label name`},
		{"long label", "tenantLabel: " + strings.Repeat("x", 65) + "\n", "is not a label name"},
		{"unknown key", "keyConcurrency: {defualt: 2}\n", `unknown key "defualt" in keyConcurrency (known keys: default, keys)`},
		{"weights list", "keyWeights: [a]\n", "want a mapping of names to integers, got a list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestKeyOf(t *testing.T) {
	ten := config.Tenancy{TenantLabel: "tenant"}
	for _, tc := range []struct {
		name string
		job  protocol.Job
		want string
		bad  bool
	}{
		{"concurrencyKey wins", protocol.Job{ConcurrencyKey: "acme", Labels: map[string]string{"tenant": "bolt"}}, "acme", false},
		{"label", protocol.Job{Labels: map[string]string{"tenant": "bolt"}}, "bolt", false},
		{"none", protocol.Job{Labels: map[string]string{"team": "x"}}, "", false},
		{"label not a key", protocol.Job{Labels: map[string]string{"tenant": "a b"}}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ten.KeyOf(tc.job)
			if got != tc.want || (err != nil) != tc.bad || tc.bad && !errors.Is(err, protocol.ErrInvalidJob) {
				t.Fatalf("KeyOf = %q, %v; want %q (error %v)", got, err, tc.want, tc.bad)
			}
		})
	}
	if k, _ := (&config.Tenancy{}).KeyOf(protocol.Job{Labels: map[string]string{"tenant": "bolt"}}); k != "" {
		t.Fatalf("no tenantLabel: key %q, want none", k)
	}
}

func TestChangedKeys(t *testing.T) {
	a, err := config.Parse([]byte("concurrency: 4\nkeyConcurrency: {default: 2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := config.Parse([]byte("concurrency: 8\nkeyConcurrency: {default: 5}\nprofiles: {x: {command: [a]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(a.ChangedKeys(b), ","); got != "concurrency,profiles" {
		t.Fatalf("changed keys %q, want concurrency,profiles (the tenancy reloads)", got)
	}
	if got := a.ChangedKeys(a); len(got) != 0 {
		t.Fatalf("a config against itself: %v", got)
	}
}
