package console_test

import (
	"errors"
	"testing"
	"time"

	"github.com/batonhq/baton/console"
	"github.com/batonhq/baton/protocol"
)

// TestOptionsRefuseBadValues: an option given a value it cannot take makes
// New fail with ErrInvalidOption, before the console touches NATS.
func TestOptionsRefuseBadValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  console.Option
	}{
		{"empty token", console.WithToken("")},
		{"zero session TTL", console.WithSessionTTL(0)},
		{"negative session TTL", console.WithSessionTTL(-time.Hour)},
		{"base path with a query", console.WithBasePath("/baton?x=1")},
		{"base path with a fragment", console.WithBasePath("/baton#top")},
		{"base path climbing", console.WithBasePath("/a/../b")},
		{"nil token issuer", console.WithTokenIssuer(nil)},
		{"nil interactive test", console.WithInteractive(nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := console.New(t.Context(), nil, protocol.MustNames(""), console.WithoutAuth(), tc.opt)
			if !errors.Is(err, console.ErrInvalidOption) {
				t.Fatalf("New = %v, want ErrInvalidOption", err)
			}
		})
	}
}
