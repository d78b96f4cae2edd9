package worker_test

import (
	"errors"
	"testing"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/worker"
)

// TestOptionsRefuseBadValues: an option given a value it cannot take makes
// New fail with ErrInvalidOption; the empty values that mean "the default"
// are taken.
func TestOptionsRefuseBadValues(t *testing.T) {
	s := testenv.RunServer(t)
	nc, _ := testenv.Connect(t, s)
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		opt  worker.Option
		bad  bool
	}{
		{"node id with a dot", worker.WithNode("a.b"), true},
		{"node id too long", worker.WithNode(string(make([]byte, 65))), true},
		{"empty node id is the default", worker.WithNode(""), false},
		{"worker id with a space", worker.WithID("w 1"), true},
		{"empty state directory", worker.WithStateDir(""), true},
		{"zero ack wait", worker.WithAckWait(0), true},
		{"negative grace", worker.WithGrace(-time.Second), true},
		{"zero grace hands nothing off", worker.WithGrace(0), false},
		{"nil service connection", worker.WithServiceConn(nil), true},
		{"nil metrics registerer", worker.WithMetrics(nil), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := worker.New(nc, config.Default(), worker.WithStateDir(dir), tc.opt)
			if tc.bad != errors.Is(err, worker.ErrInvalidOption) || (!tc.bad && err != nil) {
				t.Fatalf("New = %v, want invalid option %v", err, tc.bad)
			}
		})
	}
}
