package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/fakeagent"
	"github.com/batonhq/baton/protocol"
)

var update = flag.Bool("update", false, "rewrite testdata/demo.golden")

// TestDemoTranscript: what `baton demo` shows of its run, as `baton watch`
// prints it, is testdata/demo.golden: one session told in order, each
// message's text whole, then the follow-up the demo sends as the user's
// turn and the agent's second turn. The fake agent runs with the demo's
// profile's own arguments (less the pacing), fed the demo's input and
// follow-up, which the chain shows right after the first result.
func TestDemoTranscript(t *testing.T) {
	argv := demoTurns().Command
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
	followUp := string(client.StreamJSONUserMessage(demoFollowUp)) + "\n"
	stdin := string(client.StreamJSONUserMessage(demoInput)) + "\n" + followUp
	var journal bytes.Buffer
	if err := fakeagent.Run(context.Background(), strings.NewReader(stdin), &journal, io.Discard, o); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	p := &eventPrinter{w: &out}
	results := 0
	for line := range bytes.Lines(journal.Bytes()) {
		if err := p.print(evLine(protocol.KindEvents, string(line))); err != nil {
			t.Fatal(err)
		}
		if bytes.HasPrefix(line, []byte(`{"type":"result"`)) {
			results++
			if results == 1 {
				if err := p.print(evLine(protocol.KindInput, followUp)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	p.finish()
	if results != 2 {
		t.Errorf("%d result lines, want 2 (one per turn)", results)
	}

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

// TestDemoNextNamesFiles: every file the demo's "What next" names (a
// config to start from, the quickstart) is in the repository, and the
// config parses.
func TestDemoNextNamesFiles(t *testing.T) {
	files := regexp.MustCompile(`[\w./-]+\.(?:md|yaml)\b`).FindAllString(demoNext, -1)
	if !slices.Contains(files, "deploy/baton.yaml") || !slices.Contains(files, "docs/quickstart.md") {
		t.Fatalf("the demo's What next names %q: want deploy/baton.yaml and docs/quickstart.md", files)
	}
	for _, f := range files {
		if _, err := os.Stat(filepath.Join("..", "..", f)); err != nil {
			t.Errorf("the demo's What next names %s: %v", f, err)
		}
	}
	if _, err := config.Load(filepath.Join("..", "..", "deploy", "baton.yaml")); err != nil {
		t.Errorf("deploy/baton.yaml: %v", err)
	}
}
