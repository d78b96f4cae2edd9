package worker

import (
	"errors"
	"os"
	"testing"

	"github.com/rs/zerolog"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox"
)

func TestSignalRunnerRetries(t *testing.T) {
	other := errors.New("signal failed")
	for _, tc := range []struct {
		name    string
		results []error // what each call returns; the last repeats
		want    error
		calls   int
	}{
		{"signalled", []error{nil}, nil, 1},
		{"gone", []error{sandbox.ErrNotRunning}, sandbox.ErrNotRunning, 1},
		{"alive, then signalled", []error{sandbox.ErrTryAgain, sandbox.ErrTryAgain, nil}, nil, 3},
		{"never signallable", []error{sandbox.ErrTryAgain}, sandbox.ErrTryAgain, signalTries},
		{"another failure is not retried", []error{other}, other, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := signalRunner(journal.Dir(t.TempDir()), func(journal.Dir) error {
				calls++
				return tc.results[min(calls, len(tc.results))-1]
			})
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("signalRunner = %v, want %v", err, tc.want)
			}
			if calls != tc.calls {
				t.Errorf("%d calls, want %d", calls, tc.calls)
			}
		})
	}
}

// TestCancelNotSentIsAskedAgain: a cancel the runner did not get is not
// taken as done, so the next check of the record asks again; the one that
// got through, or found the runner gone, is.
func TestCancelNotSentIsAskedAgain(t *testing.T) {
	r := &run{id: "r", dir: journal.Dir(t.TempDir()), log: zerolog.Nop()}
	// No pid file, no lock: no runner.
	r.cancel()
	if !r.cancelSent {
		t.Fatal("a cancel of a run with no runner was not taken as sent")
	}
	r2 := &run{id: "r2", dir: journal.Dir(t.TempDir()), log: zerolog.Nop()}
	// A garbled pid file: Cancel fails, and must be asked again.
	if err := os.WriteFile(r2.dir.PID(), []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r2.cancel()
	if r2.cancelSent {
		t.Fatal("a cancel that failed was taken as sent")
	}
}
