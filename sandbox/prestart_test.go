package sandbox

import (
	"errors"
	"testing"

	"github.com/batonhq/baton/sandbox/runspec"
)

func TestPoolable(t *testing.T) {
	if err := Poolable(Spec{Network: runspec.Network{Allow: []string{"api.example.com"}}}); err != nil {
		t.Errorf("a names-only network: %v", err)
	}
	if err := Poolable(Spec{Network: runspec.Network{Allow: []string{"10.0.0.0/8"}}}); !errors.Is(err, ErrNotPooled) {
		t.Errorf("a CIDR entry: %v, want ErrNotPooled", err)
	}
	n := runspec.Network{Allow: []string{"api.example.com"}, Secrets: []runspec.Secret{{Name: "K", Hosts: []string{"api.example.com"}}}}
	if err := Poolable(Spec{Network: n}); !errors.Is(err, ErrNotPooled) {
		t.Errorf("secrets: %v, want ErrNotPooled", err)
	}
}
