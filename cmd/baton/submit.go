package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/protocol"
)

// submitFlags are submit's flags; job turns them into a Job.
type submitFlags struct {
	profile string
	input   string
	runID   string
	args    []string
	env     []string
	files   []string
	labels  []string
	timeout time.Duration
	output  string
	limits  []string
	retries int
	// outputs narrows the capture's files; diff, when set, keeps or drops
	// the profile's diff.
	outputs []string
	diff    optBool
	watch   bool
	// interactive attaches instead of watching; streamJSON wraps its lines.
	interactive, streamJSON bool
	json                    bool
	// workspace is a directory or archive uploaded to seed the workspace.
	workspace string
	// git, gitRef and gitDepth are a repository cloned into the workspace.
	git, gitRef string
	gitDepth    int
	// session makes the run a turn of that session.
	session string
	// policy is the job's policy, as JSON.
	policy string
	// key and priority are the job's concurrency key and priority.
	key      string
	priority int
}

func newSubmitCmd(g *globals) *cobra.Command {
	var f submitFlags
	cmd := &cobra.Command{
		Use:   "submit --profile PROFILE [flags]",
		Short: "Submit a job: start a run of a profile's agent",
		Long: `submit publishes a job on the jobs stream and prints its run id. A worker
that has the profile starts the run; the job's input is written to the
agent's stdin. Submitting the same --run-id again (within the stream's
two-minute duplicates window) does not start a second run.

--workspace uploads a directory (as a gzipped tar, without sockets and
devices) or a tar or gzipped tar to the workspaces stream, named
sha256-<hex>.tar[.gz] so the same archive is stored once, and has the
worker extract it into the workspace before the agent starts (the job's
--file files are written over it). --git clones a repository into the
workspace instead, in the sandbox through the run's egress (the host on
the profile's network.allow; a profile secret with header basic for it is
the credential, never in the URL).

With --watch it then follows the run like 'baton watch', and its exit
status follows the run's: 0 if it succeeded, 1 if not, 2 if watching failed.
With --interactive it attaches like 'baton attach': each line of stdin is
sent to the agent (the profile needs "stdin: stream"), and the end of
stdin closes the agent's stdin.`,
		Example: `  # Start a run of the demo profile and follow it
  baton submit --profile demo --input 'list the files' --watch

  # Input from stdin, a seed file, a bounded time, a label
  git diff | baton submit --profile reviewer --input - \
      --file CONTRIBUTING.md=./CONTRIBUTING.md --timeout 10m --label pr=1234

  # Seed the workspace with a repository (tarred and gzipped, uploaded once)
  baton submit --profile claude --workspace ./repo --input 'fix the failing test' --watch

  # Clone a branch of a private repository (the profile's secret for its host)
  baton submit --profile claude --git https://github.com/org/repo.git --git-ref main --input 'fix the failing test'

  # Lower limits, two retries if its node is lost, capture out/ only and no diff
  baton submit --profile claude --input 'write the report' --limit disk=2GiB \
      --limit outputs=10MiB --retries 2 --outputs 'out/**' --diff=false

  # A conversation: type follow-ups, Ctrl-D ends it
  baton submit --profile claude-chat --interactive --stream-json --input 'fix the flaky test'

  # Idempotent submission with your own id, machine-readable output
  baton submit --profile demo --run-id nightly-2026-01-31 --input go --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			job, err := f.job(cmd.InOrStdin(), os.ReadFile)
			if err != nil {
				return err
			}
			s, err := openSession(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer s.close()
			if f.workspace != "" {
				name, err := putWorkspace(cmd.Context(), s.c, f.workspace)
				if err != nil {
					return err
				}
				job.Workspace = &protocol.WorkspaceRef{Object: name}
			}
			// A rejection stored before now, less clock skew, is an older
			// job's: the duplicates window refuses the same runId sooner.
			submitted := time.Now().Add(-time.Minute)
			err = s.c.Submit(cmd.Context(), job)
			dup := errors.Is(err, client.ErrDuplicate)
			if err != nil && !dup {
				return err
			}
			out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
			if f.json {
				err = json.NewEncoder(out).Encode(struct {
					RunID     string `json:"runId"`
					Duplicate bool   `json:"duplicate"`
				}{job.RunID, dup})
			} else {
				_, err = fmt.Fprintln(out, job.RunID)
			}
			if err != nil {
				return err
			}
			if dup {
				fmt.Fprintf(errOut, "run %s was already submitted; it was not submitted again\n", job.RunID)
				submitted = time.Time{} // the run is the earlier job's, rejected or not
			}
			if f.interactive {
				return s.attach(cmd.Context(), job.RunID, cmd.InOrStdin(), f.streamJSON, f.json, out, errOut)
			}
			if !f.watch {
				return nil
			}
			return s.watchSince(cmd.Context(), job.RunID, submitted, job.Input, f.json, out, errOut)
		},
	}
	f.addFlags(cmd.Flags())
	_ = cmd.MarkFlagRequired("profile") // cannot fail: the flag is defined above
	return cmd
}

// addFlags defines submit's flags on fl.
func (f *submitFlags) addFlags(fl *pflag.FlagSet) {
	fl.StringVar(&f.profile, "profile", "", "profile of the worker's configuration to run (required)")
	fl.StringVar(&f.input, "input", "", "text written to the agent's stdin; - reads it from this command's stdin")
	fl.StringVar(&f.runID, "run-id", "", "run id, [A-Za-z0-9_-]{1,128} (default: a random run-…)")
	fl.StringArrayVar(&f.args, "arg", nil, "argument appended to the profile's command, if it allows (repeatable)")
	fl.StringArrayVar(&f.env, "env", nil, "KEY=VALUE environment variable the profile allows (repeatable)")
	fl.DurationVar(&f.timeout, "timeout", 0, "limit on the run's duration, e.g. 10m (only shortens the profile's)")
	fl.StringVar(&f.output, "output-limit", "", "cap on what the agent prints on stdout, e.g. 1MiB (only lowers the profile's); the same as --limit output=SIZE")
	fl.StringArrayVar(&f.limits, "limit", nil, "KIND=SIZE: lower a limit of the profile for this run: output (stdout), disk (workspace), outputs (what the capture stores), e.g. disk=2GiB (repeatable)")
	fl.IntVar(&f.retries, "retries", 0, fmt.Sprintf("start the run again, as <run-id>-a2, -a3…, up to this many times if it is lost with its node (0 to %d)", protocol.MaxRetries))
	fl.StringArrayVar(&f.outputs, "outputs", nil, "PATTERN: capture only the profile's output files that also match it, e.g. 'out/**' (repeatable)")
	fl.Var(&f.diff, "diff", "keep (--diff) or drop (--diff=false) the profile's captured diff; refused when the profile captures none")
	fl.Lookup("diff").NoOptDefVal = "true"
	fl.StringArrayVar(&f.files, "file", nil, "PATH=LOCALFILE: seed the workspace's PATH (or, after ~/, the agent's home's) with a local text file (repeatable)")
	fl.StringVar(&f.git, "git", "", "URL: clone this https:// repository into the workspace before the agent starts (no credential in it: a profile secret holds it)")
	fl.StringVar(&f.gitRef, "git-ref", "", "REF: the branch, tag or commit --git clones (default: the repository's HEAD)")
	fl.IntVar(&f.gitDepth, "git-depth", 0, "N: commits of history --git fetches (default 1)")
	fl.StringVar(&f.workspace, "workspace", "", "DIR or FILE.tar[.gz]: upload it to the workspaces stream (named by its SHA-256, so once) and seed the workspace with it")
	fl.StringArrayVar(&f.labels, "label", nil, "KEY=VALUE label copied to the run record (repeatable)")
	fl.StringVar(&f.policy, "policy", "", `JSON: narrow the profile's policy for permission prompts, e.g. '{"deny":["Bash(git push*)"]}' (docs/configuration.md)`)
	fl.StringVar(&f.key, "key", "", "the job's concurrency key (a tenant, a user): the cluster runs at most keyConcurrency of a key at once and shares free slots fairly between keys (docs/tenancy.md)")
	fl.IntVar(&f.priority, "priority", 0, fmt.Sprintf("order among the key's waiting jobs, %d (lowest) to %d (highest); default %d", protocol.MinPriority, protocol.MaxPriority, protocol.DefaultPriority))
	fl.StringVar(&f.session, "session", "", "make the run a turn of this session: it starts from the session's last checkpoint, after its earlier runs (docs/sessions.md)")
	fl.BoolVar(&f.watch, "watch", false, "follow the run until it ends, like 'baton watch'")
	fl.BoolVar(&f.interactive, "interactive", false, "then attach: follow the run and send each line of stdin as input, like 'baton attach' (profile stdin: stream)")
	fl.BoolVar(&f.streamJSON, "stream-json", false, "wrap --input (and, with --interactive, each line) as a Claude Code stream-json user message")
	fl.BoolVar(&f.json, "json", false, `print {"runId":…,"duplicate":…}; with --watch, payloads as 'watch --json'`)
}

// job builds the Job the flags describe; stdin serves --input -, readFile
// serves --file.
func (f *submitFlags) job(stdin io.Reader, readFile func(string) ([]byte, error)) (protocol.Job, error) {
	job := protocol.Job{RunID: f.runID, Profile: f.profile, Input: f.input, Args: f.args, Session: f.session,
		ConcurrencyKey: f.key, Priority: f.priority}
	if job.RunID == "" {
		job.RunID = protocol.NewRunID()
	}
	if f.input == "-" {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return protocol.Job{}, fmt.Errorf("--input -: read stdin: %w", err)
		}
		job.Input = string(b)
	}
	if f.streamJSON && job.Input != "" {
		job.Input = string(client.StreamJSONUserMessage(strings.TrimSuffix(job.Input, "\n"))) + "\n"
	}
	job.Timeout = protocol.Duration(f.timeout)
	job.Retries = f.retries
	var err error
	if job.Limits, err = parseAssignments("--limit", f.limits); err != nil {
		return protocol.Job{}, err
	}
	if f.output != "" {
		if _, dup := job.Limits[protocol.JobLimitOutput]; dup {
			return protocol.Job{}, fmt.Errorf("--output-limit and --limit %s= both given: give one", protocol.JobLimitOutput)
		}
		if job.Limits == nil {
			job.Limits = map[string]string{}
		}
		job.Limits[protocol.JobLimitOutput] = f.output
	}
	if f.outputs != nil || f.diff.set {
		job.Outputs = &protocol.JobOutputs{Files: f.outputs}
		if f.diff.set {
			diff := f.diff.v
			job.Outputs.Diff = &diff
		}
	}
	if f.policy != "" {
		dec := json.NewDecoder(strings.NewReader(f.policy))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&job.Policy); err != nil {
			return protocol.Job{}, fmt.Errorf("--policy: %w (want %s)", err, `{"default":"deny","allow":["Read"],"ask":[…],"deny":[…]}`)
		}
	}
	if job.Env, err = parseAssignments("--env", f.env); err != nil {
		return protocol.Job{}, err
	}
	if job.Labels, err = parseAssignments("--label", f.labels); err != nil {
		return protocol.Job{}, err
	}
	if job.Files, err = parseFiles(f.files, readFile); err != nil {
		return protocol.Job{}, err
	}
	switch {
	case f.git != "" && f.workspace != "":
		return protocol.Job{}, errors.New("--git and --workspace both given: a workspace is seeded from one of them")
	case f.git != "":
		job.Workspace = &protocol.WorkspaceRef{Git: &protocol.GitSource{URL: f.git, Ref: f.gitRef, Depth: f.gitDepth}}
	case f.gitRef != "" || f.gitDepth != 0:
		return protocol.Job{}, errors.New("--git-ref and --git-depth go with --git")
	}
	// The worker's own rules (env names, file paths, sizes), checked here so
	// that a bad job is refused now rather than dead-lettered later.
	if err := job.Validate(protocol.Limits{}); err != nil {
		return protocol.Job{}, err
	}
	return job, nil
}

// optBool is a bool flag that tells "not given" from false.
type optBool struct{ set, v bool }

func (b *optBool) String() string {
	if !b.set {
		return ""
	}
	return strconv.FormatBool(b.v)
}

func (b *optBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want true or false")
	}
	b.set, b.v = true, v
	return nil
}

func (*optBool) Type() string { return "bool" }

// parseAssignments reads repeated KEY=VALUE flags into a map; nil when none.
func parseAssignments(flag string, values []string) (map[string]string, error) {
	if len(values) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(values))
	for _, v := range values {
		k, val, ok := strings.Cut(v, "=")
		if !ok {
			return nil, fmt.Errorf("%s %q: want KEY=VALUE", flag, v)
		}
		if k == "" {
			return nil, fmt.Errorf("%s %q: the key is empty", flag, v)
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("%s: %s given twice", flag, k)
		}
		m[k] = val
	}
	return m, nil
}

// parseFiles reads repeated PATH=LOCALFILE flags: the workspace path and the
// local file whose text it gets. Files travel as JSON strings, so they must
// be UTF-8 text.
func parseFiles(values []string, readFile func(string) ([]byte, error)) (map[string]string, error) {
	locals, err := parseAssignments("--file", values)
	if err != nil || locals == nil {
		return nil, err
	}
	files := make(map[string]string, len(locals))
	for p, local := range locals {
		if local == "" {
			return nil, fmt.Errorf("--file %s=: no local file named", p)
		}
		b, err := readFile(local)
		if err != nil {
			return nil, fmt.Errorf("--file %s: %w", p, err)
		}
		if !utf8.Valid(b) { // said here, as the job's check cannot name the local file
			return nil, fmt.Errorf("--file %s: %s is not UTF-8 text (jobs carry files as JSON strings)", p, local)
		}
		files[p] = string(b)
	}
	return files, nil
}

// putWorkspace uploads the directory or archive at p and returns its
// object name.
func putWorkspace(ctx context.Context, c *client.Client, p string) (string, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("--workspace: %w", err)
	}
	if fi.IsDir() {
		return c.PutWorkspaceDir(ctx, p)
	}
	f, err := os.Open(p)
	if err != nil {
		return "", fmt.Errorf("--workspace: %w", err)
	}
	defer f.Close()
	return c.PutWorkspace(ctx, f)
}
