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
}
