package client_test

import (
	"errors"
	"testing"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/protocol"
)

// TestOptionsRefuseBadValues: an option given a value it cannot take makes
// New fail with ErrInvalidOption, before the client touches NATS; good
// values are taken.
func TestOptionsRefuseBadValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  client.Option
		bad  bool
	}{
		{"zero max line bytes", client.WithMaxLineBytes(0), true},
		{"negative max line bytes", client.WithMaxLineBytes(-1), true},
		{"one max line byte", client.WithMaxLineBytes(1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.New(nil, protocol.MustNames(""), tc.opt)
			if tc.bad != errors.Is(err, client.ErrInvalidOption) || (!tc.bad && err != nil) {
				t.Fatalf("New = %v, want invalid option %v", err, tc.bad)
			}
		})
	}
}
