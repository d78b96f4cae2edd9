package config_test

import (
	"testing"

	"github.com/batonhq/baton/config"
)

// TestFitMaxPayload: the limits that must fit one message are lowered to
// what the server carries, and only then, each with a sentence.
func TestFitMaxPayload(t *testing.T) {
	for _, tc := range []struct {
		name               string
		maxPayload         int64
		job, input         int
		wantJob, wantInput int
		lowered            int
	}{
		{"defaults fit the default server", 1 << 20, 1 << 20, 64 << 10, 1 << 20, 64 << 10, 0},
		{"unknown max payload", 0, 1 << 20, 64 << 10, 1 << 20, 64 << 10, 0},
		{"job over a small server", 64 << 10, 1 << 20, 16 << 10, 64 << 10, 16 << 10, 1},
		{"input without header room", 64 << 10, 32 << 10, 64 << 10, 32 << 10, 64<<10 - config.InputHeaderRoom, 1},
		{"both", 32 << 10, 1 << 20, 256 << 10, 32 << 10, 32<<10 - config.InputHeaderRoom, 2},
		{"tiny server", 1 << 10, 1 << 20, 64 << 10, 1 << 10, 1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := config.Default()
			c.MaxJobBytes, c.MaxInputBytes = tc.job, config.ByteSize(tc.input)
			got := c.FitMaxPayload(tc.maxPayload)
			if len(got) != tc.lowered || c.MaxJobBytes != tc.wantJob || int(c.MaxInputBytes) != tc.wantInput {
				t.Fatalf("lowered %q to maxJobBytes %d, maxInputBytes %d; want %d sentences, %d, %d",
					got, c.MaxJobBytes, c.MaxInputBytes, tc.lowered, tc.wantJob, tc.wantInput)
			}
		})
	}
}
