package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/fakeagent"
	"github.com/batonhq/baton/protocol"
)

var update = flag.Bool("update", false, "rewrite testdata/demo.golden")

// TestDemoTranscript: what `baton demo` shows of its run, as `baton watch`
// prints it, is testdata/demo.golden: one session told in order, each
// message's text whole. The fake agent runs with the demo profile's own
// arguments (less the pacing) and the demo's input.
func TestDemoTranscript(t *testing.T) {
	argv := config.Default().Profiles[config.DemoProfile].Command
	if len(argv) < 2 || argv[0] != config.BatonToken || argv[1] != "fake-agent" {
		t.Fatalf("the demo profile runs %q, not the fake agent", argv)
	}
	var o fakeagent.Options
	fs := pflag.NewFlagSet("fake-agent", pflag.ContinueOnError)
	o.RegisterFlags(fs)
	if err := fs.Parse(argv[2:]); err != nil {
		t.Fatal(err)
	}
	o.Rate = 0
	var journal bytes.Buffer
	if err := fakeagent.Run(context.Background(), strings.NewReader(demoInput), &journal, io.Discard, o); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	p := &eventPrinter{w: &out}
	for line := range bytes.Lines(journal.Bytes()) {
		if err := p.print(evLine(protocol.KindEvents, string(line))); err != nil {
			t.Fatal(err)
		}
	}
	p.finish()

	golden := filepath.Join("testdata", "demo.golden")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test ./cmd/baton -run TestDemoTranscript -update writes it)", err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("the demo transcript differs from %s (-update rewrites it):\n%s", golden, out.String())
	}
	// Whatever the golden file says: no sentence runs into the next.
	for _, l := range strings.Split(out.String(), "\n") {
		for i := 1; i+1 < len(l); i++ {
			if l[i] == '.' && l[i+1] >= 'A' && l[i+1] <= 'Z' && l[i-1] != '.' {
				t.Errorf("sentences run together: %q", l)
				break
			}
		}
	}
}
