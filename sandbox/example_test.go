package sandbox_test

import (
	"context"
	"fmt"
	"time"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox"
)

// A worker starts a run, later probes and cancels it. The runner outlives
// the worker; the journal ends with the sentinel whatever happens.
func ExampleStart() {
	spec := sandbox.Spec{
		RunID:     "run-42",
		RunDir:    "/var/lib/baton/runs/run-42",
		Argv:      []string{"/bin/sh", "-c", `echo '{"type":"hello"}'`},
		Env:       []string{"PATH=/usr/bin:/bin"},
		Nonce:     journal.NewNonce(),
		Deadline:  time.Now().Add(time.Hour),
		KillGrace: 5 * time.Second,
	}
	r, err := sandbox.Start(context.Background(), spec, []byte("the agent's stdin"))
	if err != nil {
		fmt.Println("start:", err)
		return
	}
	fmt.Println("runner-outer pid", r.PID)

	dir := journal.Dir(spec.RunDir)
	if alive, _ := sandbox.Alive(dir); alive {
		// The sentinel will say reason "cancel".
		_ = sandbox.Cancel(dir)
	}
}
