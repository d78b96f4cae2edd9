package main

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/batonhq/baton/protocol"
)

func TestParseAssignments(t *testing.T) {
	for _, tc := range []struct {
		in      []string
		want    map[string]string
		wantErr string
	}{
		{nil, nil, ""},
		{[]string{"A=1"}, map[string]string{"A": "1"}, ""},
		{[]string{"A=", "B=x=y"}, map[string]string{"A": "", "B": "x=y"}, ""},
		{[]string{"K=v with spaces", "L=ünï"}, map[string]string{"K": "v with spaces", "L": "ünï"}, ""},
		{[]string{"A"}, nil, `--x "A": want KEY=VALUE`},
		{[]string{"=v"}, nil, "the key is empty"},
		{[]string{"A=1", "A=2"}, nil, "A given twice"},
	} {
		got, err := parseAssignments("--x", tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseAssignments(%q): got %v, want error with %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !maps.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("parseAssignments(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseFiles(t *testing.T) {
	local := map[string]string{"a.txt": "alpha\n", "bin": "\xff\xfe", "empty": ""}
	readFile := func(name string) ([]byte, error) {
		s, ok := local[name]
		if !ok {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		return []byte(s), nil
	}
	for _, tc := range []struct {
		in      []string
		want    map[string]string
		wantErr string
	}{
		{nil, nil, ""},
		{[]string{"src/a.txt=a.txt", "e=empty"}, map[string]string{"src/a.txt": "alpha\n", "e": ""}, ""},
		{[]string{"x=missing"}, nil, "missing: file does not exist"},
		{[]string{"x=bin"}, nil, "bin is not UTF-8 text"},
		{[]string{"x="}, nil, "no local file named"},
		{[]string{"x"}, nil, "want KEY=VALUE"},
	} {
		got, err := parseFiles(tc.in, readFile)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseFiles(%q): got %v, want error with %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !maps.Equal(got, tc.want) {
			t.Errorf("parseFiles(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestSubmitFlagsJob(t *testing.T) {
	readFile := func(name string) ([]byte, error) { return []byte("content of " + name), nil }
	f := submitFlags{
		profile: "demo", input: "-", args: []string{"--fast", "a,b"}, env: []string{"MODE=x"},
		files: []string{"in/seed.txt=/tmp/seed"}, labels: []string{"pr=12"}, timeout: 90 * time.Second,
		output: "1MiB",
	}
	job, err := f.job(strings.NewReader("from stdin"), readFile)
	if err != nil {
		t.Fatal(err)
	}
	if !protocol.ValidRunID(job.RunID) || !strings.HasPrefix(job.RunID, "run-") || len(job.RunID) != 24 {
		t.Errorf("generated run id %q, want run- and 20 characters", job.RunID)
	}
	if job.Input != "from stdin" || job.Profile != "demo" || len(job.Args) != 2 || job.Args[1] != "a,b" ||
		job.Env["MODE"] != "x" || job.Files["in/seed.txt"] != "content of /tmp/seed" || job.Labels["pr"] != "12" ||
		job.Timeout != protocol.Duration(90*time.Second) || job.OutputLimit() != 1<<20 {
		t.Errorf("job %+v", job)
	}
	if other, _ := f.job(strings.NewReader(""), readFile); other.RunID == job.RunID {
		t.Errorf("two generated run ids are both %q", job.RunID)
	}

	for _, tc := range []struct {
		f    submitFlags
		want error
	}{
		{submitFlags{profile: "demo", runID: "has space"}, protocol.ErrBadRunID},
		{submitFlags{profile: ""}, protocol.ErrInvalidJob},
		{submitFlags{profile: "demo", env: []string{"1BAD=x"}}, protocol.ErrInvalidJob},
		{submitFlags{profile: "demo", files: []string{"../escape=x"}}, protocol.ErrInvalidJob},
		{submitFlags{profile: "demo", files: []string{"/abs=x"}}, protocol.ErrInvalidJob},
		{submitFlags{profile: "demo", timeout: -time.Second}, protocol.ErrInvalidJob},
		{submitFlags{profile: "demo", output: "1GB"}, protocol.ErrInvalidJob},
	} {
		if _, err := tc.f.job(strings.NewReader(""), readFile); !errors.Is(err, tc.want) {
			t.Errorf("job(%+v): got %v, want %v", tc.f, err, tc.want)
		}
	}
}

// TestSubmitFlagsJobJSON checks the job, as it goes on the wire, that each
// set of flags makes.
func TestSubmitFlagsJobJSON(t *testing.T) {
	readFile := func(name string) ([]byte, error) { return []byte("text of " + name), nil }
	for _, tc := range []struct {
		args    []string
		want    string // the job's JSON after {"runId":"r","profile":"p"
		wantErr string
	}{
		{nil, `}`, ""},
		{[]string{"--input", "hi", "--arg", "-v", "--arg", "a b", "--env", "K=v", "--label", "pr=1", "--file", "s.txt=/l"},
			`,"input":"hi","args":["-v","a b"],"env":{"K":"v"},"files":{"s.txt":"text of /l"},"labels":{"pr":"1"}}`, ""},
		{[]string{"--timeout", "90s", "--retries", "3"}, `,"timeout":"1m30s","retries":3}`, ""},
		{[]string{"--limit", "disk=2GiB", "--limit", "outputs=10MiB", "--output-limit", "1MiB"},
			`,"limits":{"disk":"2GiB","output":"1MiB","outputs":"10MiB"}}`, ""},
		{[]string{"--limit", "output=1KiB"}, `,"limits":{"output":"1KiB"}}`, ""},
		{[]string{"--outputs", "out/**", "--outputs", "*.md"}, `,"outputs":{"files":["out/**","*.md"]}}`, ""},
		{[]string{"--diff=false"}, `,"outputs":{"diff":false}}`, ""},
		{[]string{"--diff", "--outputs", "a"}, `,"outputs":{"diff":true,"files":["a"]}}`, ""},
		{[]string{"--retries", "11"}, "", "between 0 and 10"},
		{[]string{"--retries", "-1"}, "", "between 0 and 10"},
		{[]string{"--limit", "cpu=2"}, "", "not a limit a job may set"},
		{[]string{"--limit", "disk=lots"}, "", "is not a size"},
		{[]string{"--limit", "disk"}, "", "want KEY=VALUE"},
		{[]string{"--limit", "output=1KiB", "--output-limit", "1MiB"}, "", "give one"},
		{[]string{"--outputs", ""}, "", "outputs.files[0]"},
		{[]string{"--diff=maybe"}, "", "want true or false"},
		{[]string{"--git", "https://h/r.git", "--git-ref", "v1", "--git-depth", "5"}, `,"workspace":{"git":{"url":"https://h/r.git","ref":"v1","depth":5}}}`, ""},
		{[]string{"--git", "https://h/r.git"}, `,"workspace":{"git":{"url":"https://h/r.git"}}}`, ""},
		{[]string{"--git", "https://u:p@h/r.git"}, "", "must not carry a credential"},
		{[]string{"--git", "https://h/r.git", "--workspace", "./repo"}, "", "both given"},
		{[]string{"--git-ref", "main"}, "", "go with --git"},
		{[]string{"--policy", `{"default":"deny","allow":["Read"]}`}, `,"policy":{"default":"deny","allow":["Read"]}}`, ""},
		{[]string{"--key", "acme", "--priority", "5"}, `,"concurrencyKey":"acme","priority":5}`, ""},
		{[]string{"--key", "a.b"}, "", `concurrencyKey "a.b" must match`},
		{[]string{"--priority", "9"}, "", `field "priority" is 9`},
		{[]string{"--policy", `{"deny":["Bash(curl *"]}`}, "", `policy: deny[0] "Bash(curl *": the pattern must end with )`},
		{[]string{"--policy", `{"commands":[]}`}, "", `--policy: json: unknown field "commands"`},
		{[]string{"--policy", `deny`}, "", `--policy: invalid character`},
	} {
		var f submitFlags
		fs := pflag.NewFlagSet("submit", pflag.ContinueOnError)
		f.addFlags(fs)
		err := fs.Parse(append([]string{"--run-id", "r", "--profile", "p"}, tc.args...))
		var job protocol.Job
		if err == nil {
			job, err = f.job(strings.NewReader(""), readFile)
		}
		var got []byte
		if err == nil {
			got, err = protocol.EncodeJob(job)
		}
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: got %v, want an error with %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if want := `{"runId":"r","profile":"p"` + tc.want; err != nil || string(got) != want {
			t.Errorf("%q:\n got %s, %v\nwant %s", tc.args, got, err, want)
		}
	}
}

// TestSubmitHasAFlagPerJobField: every field of a job has a flag of baton
// submit, which the README's command table and docs/protocol.md list; a
// field added to the job without one fails here.
func TestSubmitHasAFlagPerJobField(t *testing.T) {
	flags := map[string][]string{ // a job field: the flags that set it
		"runId": {"run-id"}, "profile": {"profile"}, "input": {"input"}, "args": {"arg"}, "env": {"env"},
		"timeout": {"timeout"}, "files": {"file"}, "labels": {"label"}, "retries": {"retries"}, "limits": {"limit"},
		"outputs": {"outputs", "diff"}, "workspace": {"workspace", "git"}, "session": {"session"},
		"policy": {"policy"}, "concurrencyKey": {"key"}, "priority": {"priority"},
	}
	cmd := newSubmitCmd(&globals{})
	var docs []string
	for _, p := range []string{"../../README.md", "../../docs/protocol.md"} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	for f := range reflect.TypeFor[protocol.Job]().Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		names, ok := flags[name]
		if !ok {
			t.Errorf("job field %s: baton submit has no flag for it (or this test knows none)", name)
			continue
		}
		for _, flag := range names {
			if cmd.Flags().Lookup(flag) == nil {
				t.Errorf("job field %s: baton submit has no --%s", name, flag)
			}
			for i, doc := range docs {
				if !strings.Contains(doc, "`--"+flag) && !strings.Contains(doc, " --"+flag+" ") && !strings.Contains(doc, "[--"+flag) {
					t.Errorf("job field %s: %s does not name baton submit's --%s", name, []string{"README.md", "docs/protocol.md"}[i], flag)
				}
			}
		}
	}
}
