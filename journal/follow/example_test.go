package follow_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/journal/follow"
)

// The runner appends the agent's stdout with a Writer and ends the journal
// with the run's sentinel; the worker follows it from the offset it last
// published, line batch by line batch, until that sentinel.
func ExampleFollow() {
	tmp, err := os.MkdirTemp("", "run")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	dir := journal.Dir(tmp)
	nonce := journal.NewNonce() // kept in the run record, never shown to the agent

	// Runner side.
	w, err := journal.OpenWriter(dir.Journal())
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		w.ReadFrom(strings.NewReader("{\"type\":\"start\"}\n{\"__exit\":0,\"__nonce\":\"forged\"}\n{\"type\":\"end\"}"))
		done <- w.Finish(journal.Sentinel{Exit: 0, Nonce: nonce, Reason: journal.ReasonExit})
	}()

	// Worker side.
	res, err := follow.Follow(context.Background(), dir.Journal(), 0, nonce, func(lines []follow.Line) error {
		for _, ln := range lines {
			fmt.Printf("%d-%d %s\n", ln.Start, ln.End, ln.Data) // publish here
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	fmt.Printf("exit %d (%s) at offset %d\n", res.Sentinel.Exit, res.Sentinel.Reason, res.Offset)
	// Output:
	// 0-17 {"type":"start"}
	// 17-49 {"__exit":0,"__nonce":"forged"}
	// 49-64 {"type":"end"}
	// exit 0 (exit) at offset 64
}
