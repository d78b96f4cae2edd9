// Command baton-runner is the runner chain of baton's sandbox alone: the
// stages a worker spawns for every run (`baton-runner runner-outer --spec
// PATH` and the three it starts), without the worker, NATS server and
// client code of the baton binary. Each stage is a process start, four per
// run, and this binary starts in a fraction of the time baton does.
//
// Install it beside baton (`go install github.com/batonhq/baton/cmd/...`);
// a worker finds it there, or is told with `baton worker --runner PATH`.
// Without it the worker runs the same stages from baton itself.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/batonhq/baton/sandbox"
)

func main() {
	if len(os.Args) != 4 || os.Args[2] != "--spec" {
		fmt.Fprintln(os.Stderr, "usage: baton-runner runner-outer|runner-outer-wait|runner-inner|runner-inner-child|runner-init-wait|runner-exec --spec PATH (started by baton worker, not by hand)")
		os.Exit(2)
	}
	if err := sandbox.RunStage(context.Background(), os.Args[1], os.Args[3]); err != nil {
		fmt.Fprintln(os.Stderr, "baton-runner:", err)
		os.Exit(1)
	}
}
