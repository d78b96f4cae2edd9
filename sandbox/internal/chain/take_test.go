package chain

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/batonhq/baton/sandbox/runspec"
)

func TestParseTake(t *testing.T) {
	for _, c := range []struct {
		name, in string
		ok       bool
	}{
		{"argv and env", `{"argv":["/bin/echo","hi"],"env":["PATH=/bin","A="]}`, true},
		{"no env", `{"argv":["a"],"env":null}`, true},
		{"empty argv", `{"argv":[],"env":[]}`, false},
		{"empty program", `{"argv":[""],"env":[]}`, false},
		{"env without =", `{"argv":["a"],"env":["PATH"]}`, false},
		{"env with a NUL", `{"argv":["a"],"env":["A=b\u0000c"]}`, false},
		{"unknown field", `{"argv":["a"],"env":[],"uid":0}`, false},
		{"two objects", `{"argv":["a"],"env":[]}{"argv":["b"],"env":[]}`, false},
		{"not JSON", `take`, false},
		{"empty", ``, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseTake([]byte(c.in))
			if (err == nil) != c.ok {
				t.Fatalf("ParseTake(%s) = %v, want ok %v", c.in, err, c.ok)
			}
			if err != nil && !errors.Is(err, runspec.ErrInvalidSpec) {
				t.Errorf("error %v is not runspec.ErrInvalidSpec", err)
			}
		})
	}
}

// A take line is one line whatever its argv and environment hold, and
// reads back as it was written.
func TestTakeLineRoundTrip(t *testing.T) {
	want := AgentTake{Argv: []string{"sh", "-c", "echo a\nb"}, Env: []string{"X=line\nbreak", "Y="}}
	line := want.Line()
	if bytes.Count(line, []byte("\n")) != 1 || !bytes.HasSuffix(line, []byte("\n")) {
		t.Fatalf("take line %q is not one line", line)
	}
	rest, ok := bytes.CutPrefix(bytes.TrimSuffix(line, []byte("\n")), []byte(TakeWord+" "))
	if !ok {
		t.Fatalf("take line %q does not start with %q", line, TakeWord)
	}
	got, err := ParseTake(rest)
	if err != nil || strings.Join(got.Argv, "|") != strings.Join(want.Argv, "|") || strings.Join(got.Env, "|") != strings.Join(want.Env, "|") {
		t.Fatalf("read back %+v, %v; want %+v", got, err, want)
	}
}

func FuzzParseTake(f *testing.F) {
	f.Add(`{"argv":["/bin/echo","hi"],"env":["PATH=/bin"]}`)
	f.Add(`{"argv":[],"env":[]}`)
	f.Add(`{"argv":["a"],"env":["="]}`)
	f.Fuzz(func(t *testing.T, in string) {
		// Whatever parses is a take the init could start: an agent and
		// an environment of KEY=value entries.
		tk, err := ParseTake([]byte(in))
		if err != nil {
			return
		}
		if runspec.ValidateArgv(tk.Argv) != nil || runspec.ValidateEnv(tk.Env) != nil {
			t.Fatalf("accepted %+v", tk)
		}
	})
}

func TestFits(t *testing.T) {
	pooled := runspec.Spec{
		RunID: "pool-1", RunDir: "/var/lib/baton/runs/.pool-1", Argv: []string{"/usr/bin/agent"},
		Env: []string{"PATH=/usr/bin", "HOME=/home/agent"}, Nonce: "n1", Pooled: true,
		Network: runspec.Network{Allow: []string{"api.example.com"}}, SandboxUID: 65534, SandboxGID: 65534,
		Limits: runspec.Limits{Pids: 64, Disk: 1 << 30},
	}
	run := func(mod func(*runspec.Spec)) runspec.Spec {
		s := pooled
		s.RunID, s.RunDir, s.Nonce, s.Pooled = "r1", "/var/lib/baton/runs/r1", "n2", false
		s.Argv = []string{"/usr/bin/agent", "--model", "x"}
		s.Env = []string{"PATH=/usr/bin", "HOME=/home/agent", "TOKEN=t"}
		s.Files = map[string]string{"a.txt": "a"}
		if mod != nil {
			mod(&s)
		}
		return s
	}
	for _, c := range []struct {
		name string
		mod  func(*runspec.Spec)
		ok   bool
	}{
		{"the job's own", nil, true},
		{"an output limit", func(s *runspec.Spec) { s.Limits.Output, s.Limits.Outputs = 1<<20, 1<<20 }, true},
		{"stdin and interrupt", func(s *runspec.Spec) { s.Stdin, s.InterruptLine = runspec.StdinStream, "stop" }, true},
		{"empty mounts", func(s *runspec.Spec) { s.Mounts = []runspec.Mount{} }, true},
		{"another runs directory", func(s *runspec.Spec) { s.RunDir = "/srv/runs/r1" }, false},
		{"another agent", func(s *runspec.Spec) { s.Argv = []string{"/usr/bin/other"} }, false},
		{"another baton", func(s *runspec.Spec) { s.Baton = "/opt/baton" }, false},
		{"another HOME", func(s *runspec.Spec) { s.Env = []string{"PATH=/usr/bin", "HOME=/tmp"} }, false},
		{"no HOME", func(s *runspec.Spec) { s.Env = []string{"PATH=/usr/bin"} }, false},
		{"another network", func(s *runspec.Spec) { s.Network = runspec.Network{} }, false},
		{"a mount", func(s *runspec.Spec) { s.Mounts = []runspec.Mount{{Source: "/srv"}} }, false},
		{"a disk limit", func(s *runspec.Spec) { s.Limits.Disk = 64 << 20 }, false},
		{"a pids limit", func(s *runspec.Spec) { s.Limits.Pids = 32 }, false},
		{"a cgroup", func(s *runspec.Spec) { s.CgroupParent = "/sys/fs/cgroup/baton" }, false},
		{"sandbox ids", func(s *runspec.Spec) { s.SandboxUID = 1000 }, false},
		{"agent ids", func(s *runspec.Spec) { s.AgentGID = 2000 }, false},
		{"a repository to clone", func(s *runspec.Spec) { s.Git = &runspec.Git{URL: "https://h/r", Depth: 1} }, false},
		{"a take over its bound", func(s *runspec.Spec) { s.Env = append(s.Env, "BIG="+strings.Repeat("x", MaxTakeLine)) }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Fits(pooled, run(c.mod))
			if (err == nil) != c.ok {
				t.Fatalf("Fits = %v, want ok %v", err, c.ok)
			}
			if err != nil && !errors.Is(err, ErrNotPooled) {
				t.Errorf("error %v is not ErrNotPooled", err)
			}
		})
	}
}

func TestAgentSpecEnvSecrets(t *testing.T) {
	s := runspec.Spec{Env: []string{"A=1", "SSL_CERT_FILE=/mine.pem"}, Network: runspec.Network{Allow: []string{"api.example.com"}}}
	if env := AgentSpecEnv(s); !slices.Contains(env, "SSL_CERT_FILE=/mine.pem") || slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "NODE_EXTRA_CA_CERTS=") }) {
		t.Errorf("without secrets: %q", env)
	}
	s.Network.Secrets = []runspec.Secret{{Name: "K"}}
	env := AgentSpecEnv(s)
	// The run's CA wins over what the profile set: the agent's TLS must
	// trust the proxy for the secrets' hosts.
	for _, kv := range CAEnv() {
		if !slices.Contains(env, kv) {
			t.Errorf("env %q lacks %s", env, kv)
		}
	}
	if slices.Contains(env, "SSL_CERT_FILE=/mine.pem") || !slices.Contains(env, "A=1") || !slices.Contains(env, "HTTPS_PROXY=http://"+ProxyAddr) {
		t.Errorf("env %q", env)
	}
}
