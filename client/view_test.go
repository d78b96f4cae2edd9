package client_test

import (
	"encoding/json"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/policy"
	"github.com/batonhq/baton/protocol"
)

// TestRunViewHasEveryRecordField: the view that `baton runs get --json`
// and the console print has every field of the run record, under the
// record's own name, as docs/protocol.md lists them; it left out the
// input, the kept job, retries and the interactive fields.
func TestRunViewHasEveryRecordField(t *testing.T) {
	names := func(typ reflect.Type, tag string) []string {
		var out []string
		for f := range typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get(tag), ",")
			out = append(out, name)
		}
		slices.Sort(out)
		return out
	}
	record, view := names(reflect.TypeFor[kv.RunRecord](), "msgpack"), names(reflect.TypeFor[client.RunView](), "json")
	if !slices.Equal(record, view) {
		t.Fatalf("the run record's fields %q, the view's %q: want the same", record, view)
	}
	// Each is copied: a record with every field set shows every one.
	now, code := time.Now(), 3
	full := kv.RunRecord{RunID: "r", State: "running", Node: "n", Worker: "w", Profile: "p", Attempt: 2, Deadline: now,
		CancelRequested: true, Interactive: true, TurnEndField: "type", TurnEndEquals: "result", IdleTimeout: time.Minute,
		WaitingSince: now, CreatedAt: now, StartedAt: now, FinishedAt: now, ExitCode: &code, Reason: "why", Offset: 9, LastSeq: 4,
		Labels: map[string]string{"k": "v"}, Key: "acme", Retries: 1, Job: []byte(`{"runId":"r","profile":"p"}`), Input: "hi", Spawning: true,
		Session: "s", Checkpoint: &kv.SessionCheckpoint{Object: "s/r"}, PauseAfter: time.Minute, PauseRequested: true, Events: "claude",
		Policy: &policy.Policy{Deny: []string{"Bash(curl *)"}}, AskTimeout: 45 * time.Second, Usage: &protocol.Usage{WallSeconds: 1}}
	b, err := json.Marshal(client.NewRunView(full))
	if err != nil {
		t.Fatal(err)
	}
	var shown map[string]any
	if err := json.Unmarshal(b, &shown); err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(shown)); !slices.Equal(got, record) {
		t.Fatalf("the view of a full record shows %q, want %q: %s", got, record, b)
	}
}

// TestProtocolDocListsEveryRecordField: docs/protocol.md's Run records
// names every field of the record (a field added without a word there
// fails here).
func TestProtocolDocListsEveryRecordField(t *testing.T) {
	doc, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "## Run records")
	section, _, _ = strings.Cut(section, "\n## ")
	for f := range reflect.TypeFor[kv.RunRecord]().Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("msgpack"), ",")
		if !regexp.MustCompile(`[\x60\s,(]` + name + `[\x60\s,)]`).MatchString(section) {
			t.Errorf("docs/protocol.md's Run records does not name the record's field %s", name)
		}
	}
}
