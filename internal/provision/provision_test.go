package provision_test

import (
	"context"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/provision"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
)

func TestEnsureIsIdempotent(t *testing.T) {
	s := testenv.RunServer(t)
	_, js := testenv.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n := protocol.MustNames("")
	for i := range 2 {
		r, err := provision.Ensure(ctx, js, n, provision.Options{LeaseTTL: 3 * time.Second})
		if err != nil {
			t.Fatalf("ensure #%d: %v", i, err)
		}
		info, err := r.Events.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !info.Config.AllowAtomicPublish || info.Config.AllowDirect {
			t.Fatalf("events stream: atomic=%v direct=%v", info.Config.AllowAtomicPublish, info.Config.AllowDirect)
		}
		st, err := r.Leases.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.TTL() != 3*time.Second {
			t.Fatalf("lease TTL = %v", st.TTL())
		}
	}
}
