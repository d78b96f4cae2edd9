package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/config"
)

// TestCLIRerun: rerun submits a finished run's job again as a new run,
// which --watch follows to its end; the new run has the job's profile,
// input and labels. A run without a record is refused.
func TestCLIRerun(t *testing.T) {
	e := newCLIEnv(t)
	cfg := config.Default()
	cfg.Profiles["echo"] = config.Profile{Command: []string{"/bin/cat"}, Timeout: time.Minute}
	e.startWorker(cfg)
	if out, errOut, err := e.run("", "submit", "--profile", "echo", "--run-id", "first", "--input", "say it twice", "--label", "team=a", "--watch"); err != nil {
		t.Fatalf("submit --watch: %v\n%s\n%s", err, out, errOut)
	}
	out, errOut, err := e.run("", "rerun", "first", "--run-id", "second", "--watch")
	if err != nil || !strings.HasPrefix(out, "second\nyou › say it twice\n● started") || !strings.Contains(out, "raw│ say it twice\n● succeeded") {
		t.Fatalf("rerun --watch: %v\nstdout %q\nstderr %q", err, out, errOut)
	}
	out, _, err = e.run("", "runs", "get", "second", "--json")
	var rec struct {
		Profile, Input string
		Labels         map[string]string
	}
	if err != nil || json.Unmarshal([]byte(out), &rec) != nil || rec.Profile != "echo" || rec.Input != "say it twice" || rec.Labels["team"] != "a" {
		t.Fatalf("the re-run's record %s (%v), want the first run's job", out, err)
	}
	if _, _, err := e.run("", "rerun", "nosuch"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("rerun of a run without a record: %v, want not found", err)
	}
}
