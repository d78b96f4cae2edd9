package fakeagent_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/batonhq/baton/fakeagent"
)

// Run writes a deterministic stream; here, the kinds of its events, with
// runs of text deltas counted.
func ExampleRun() {
	var out bytes.Buffer
	err := fakeagent.Run(context.Background(), nil, &out, io.Discard, fakeagent.Options{Lines: 24, Seed: 7})
	if err != nil {
		panic(err)
	}
	sc := bufio.NewScanner(&out)
	deltas := 0
	for sc.Scan() {
		var ev struct {
			Type    string
			Subtype string
			Event   struct{ Type string }
			Message struct {
				Content []struct{ Type, Name string }
			}
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			panic(err)
		}
		if ev.Event.Type == "content_block_delta" {
			deltas++
			continue
		}
		if deltas > 0 {
			fmt.Println("  text deltas:", deltas)
			deltas = 0
		}
		kind := []string{ev.Type, ev.Subtype + ev.Event.Type}
		for _, c := range ev.Message.Content {
			kind = append(kind, strings.TrimSuffix(c.Type+":"+c.Name, ":"))
		}
		fmt.Println(strings.Join(strings.Fields(strings.Join(kind, " ")), " "))
	}
	// Output:
	// system init
	// stream_event message_start
	// stream_event content_block_start
	//   text deltas: 9
	// stream_event content_block_stop
	// assistant text tool_use:Read
	// stream_event message_delta
	// stream_event message_stop
	// user tool_result
	// stream_event message_start
	// stream_event content_block_start
	//   text deltas: 5
	// result success
}

// An agent told to fail writes an error result and asks to exit non-zero.
func ExampleRun_failure() {
	var out, stderr bytes.Buffer
	err := fakeagent.Run(context.Background(), nil, &out, &stderr, fakeagent.Options{Lines: 3, ExitCode: 3, Stderr: "boom"})
	var ee *fakeagent.ExitError
	fmt.Println(errors.As(err, &ee), ee.Code, ee)
	fmt.Print(stderr.String())
	// Output:
	// true 3 exit status 3
	// boom
}
