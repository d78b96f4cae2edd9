package runspec

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func validSpec() Spec {
	return Spec{
		RunID:  "run-1",
		RunDir: "/var/lib/baton/runs/run-1",
		Argv:   []string{"claude", "-p"},
		Env:    []string{"PATH=/usr/bin:/bin", "EMPTY="},
		Nonce:  "0123456789abcdef0123456789abcdef",
		Files:  map[string]string{"a.txt": "x", "dir/b.txt": "y"},
	}
}

// specJSON is validSpec's spec file.
func specJSON(t testing.TB) string {
	b, err := json.Marshal(validSpec())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestValidate(t *testing.T) {
	if err := validSpec().Validate(); err != nil {
		t.Fatalf("valid spec: %v", err)
	}
	cases := []struct {
		name   string
		mutate func(*Spec)
		want   error
		msg    string
	}{
		{"bad run id", func(s *Spec) { s.RunID = "a.b" }, ErrInvalidSpec, "run id"},
		{"empty run id", func(s *Spec) { s.RunID = "" }, ErrInvalidSpec, "run id"},
		{"relative run dir", func(s *Spec) { s.RunDir = "runs/run-1" }, ErrInvalidSpec, "absolute"},
		{"unclean run dir", func(s *Spec) { s.RunDir = "/var/lib/../lib/baton/run-1" }, ErrInvalidSpec, "clean"},
		{"run dir under /", func(s *Spec) { s.RunDir = "/run-1" }, ErrInvalidSpec, "directly under /"},
		{"run dir /", func(s *Spec) { s.RunDir = "/" }, ErrInvalidSpec, "directly under /"},
		{"run dir under /usr", func(s *Spec) { s.RunDir = "/usr/local/var/baton/runs/r1" }, ErrInvalidSpec, "under /usr"},
		{"run dir under /etc", func(s *Spec) { s.RunDir = "/etc/baton/runs/r1" }, ErrInvalidSpec, "under /etc"},
		{"no argv", func(s *Spec) { s.Argv = nil }, ErrInvalidSpec, "argv is empty"},
		{"empty argv0", func(s *Spec) { s.Argv = []string{""} }, ErrInvalidSpec, "argv is empty"},
		{"relative baton", func(s *Spec) { s.Baton = "bin/baton" }, ErrInvalidSpec, "baton binary"},
		{"unclean baton", func(s *Spec) { s.Baton = "/a/../baton" }, ErrInvalidSpec, "baton binary"},
		{"NUL in argv", func(s *Spec) { s.Argv = []string{"a", "b\x00c"} }, ErrInvalidSpec, "NUL"},
		{"env without =", func(s *Spec) { s.Env = []string{"PATH"} }, ErrInvalidSpec, "KEY=value"},
		{"env empty key", func(s *Spec) { s.Env = []string{"=x"} }, ErrInvalidSpec, "KEY=value"},
		{"env NUL", func(s *Spec) { s.Env = []string{"A=b\x00"} }, ErrInvalidSpec, "KEY=value"},
		{"no nonce", func(s *Spec) { s.Nonce = "" }, ErrInvalidSpec, "nonce"},
		{"nonce with a quote", func(s *Spec) { s.Nonce = `ab"cd` }, ErrInvalidSpec, "nonce"},
		{"nonce too long", func(s *Spec) { s.Nonce = strings.Repeat("a", 257) }, ErrInvalidSpec, "nonce"},
		{"negative grace", func(s *Spec) { s.KillGrace = -time.Second }, ErrInvalidSpec, "grace"},
		{"negative uid", func(s *Spec) { s.SandboxUID = -1 }, ErrInvalidSpec, "uid"},
		{"huge gid", func(s *Spec) { s.SandboxGID = 1 << 32 }, ErrInvalidSpec, "uid/gid"},
		{"escaping seed", func(s *Spec) { s.Files = map[string]string{"../x": ""} }, ErrInvalidSpec, "inside the workspace"},
		{"absolute seed", func(s *Spec) { s.Files = map[string]string{"/etc/passwd": ""} }, ErrInvalidSpec, "inside the workspace"},
		{"seed is workspace", func(s *Spec) { s.Files = map[string]string{"a/..": ""} }, ErrInvalidSpec, "workspace itself"},
		{"duplicate seeds", func(s *Spec) { s.Files = map[string]string{"a": "", "./a": ""} }, ErrInvalidSpec, "same file"},
		{"bad allowlist", func(s *Spec) { s.Network = Network{Allow: []string{"127.0.0.0/8"}} }, ErrInvalidSpec, "covers 127.0.0.0/8"},
		{"pin off the list", func(s *Spec) {
			s.Network = Network{Allow: []string{"a.example.com"}, Hosts: map[string]string{"b.example.com": "10.0.0.1"}}
		}, ErrInvalidSpec, "not on the allowlist"},
		{"mount over /usr", func(s *Spec) { s.Mounts = []Mount{{Source: "/opt/x", Target: "/usr/x"}} }, ErrInvalidSpec, "under /usr"},
		{"relative mount", func(s *Spec) { s.Mounts = []Mount{{Source: "opt"}} }, ErrInvalidSpec, "absolute"},
		{"bad rlimit", func(s *Spec) { s.Limits.Rlimits = Rlimits{"files": 1} }, ErrInvalidSpec, "unknown limit"},
		{"negative pids", func(s *Spec) { s.Limits.Pids = -1 }, ErrInvalidSpec, "pids"},
		{"agent uid", func(s *Spec) { s.AgentUID = -1 }, ErrInvalidSpec, "agent uid"},
		{"cgroup parent", func(s *Spec) { s.CgroupParent = "sys/fs/cgroup" }, ErrInvalidSpec, "cgroup parent"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := validSpec()
			c.mutate(&s)
			err := s.Validate()
			if !errors.Is(err, c.want) {
				t.Fatalf("Validate = %v, want %v", err, c.want)
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error %q does not mention %q", err, c.msg)
			}
		})
	}
}

func TestSeedPath(t *testing.T) {
	ok := map[string]string{"a": "a", "a/b": "a/b", "./a": "a", "a//b": "a/b", "a/../b": "b", ".hidden": ".hidden", `back\slash`: `back\slash`}
	for in, want := range ok {
		if got, err := SeedPath(in); err != nil || got != want {
			t.Errorf("SeedPath(%q) = %q, %v, want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", ".", "..", "../a", "a/../..", "/a", "a\x00b", "a/.."} {
		if got, err := SeedPath(in); !errors.Is(err, ErrInvalidSpec) {
			t.Errorf("SeedPath(%q) = %q, %v, want ErrInvalidSpec", in, got, err)
		}
	}
}

func TestSandboxIDs(t *testing.T) {
	cases := []struct {
		name             string
		specUID, specGID int
		euid, egid       int
		uid, gid         int
	}{
		{"root, defaults", 0, 0, 0, 0, DefaultSandboxUID, DefaultSandboxGID},
		{"root, spec ids", 1500, 1600, 0, 0, 1500, 1600},
		{"root, uid only", 1500, 0, 0, 0, 1500, DefaultSandboxGID},
		{"user maps to itself", 1500, 1600, 1000, 1001, 1000, 1001},
	}
	for _, c := range cases {
		s := Spec{SandboxUID: c.specUID, SandboxGID: c.specGID}
		if uid, gid := s.SandboxIDs(c.euid, c.egid); uid != c.uid || gid != c.gid {
			t.Errorf("%s: SandboxIDs = %d/%d, want %d/%d", c.name, uid, gid, c.uid, c.gid)
		}
	}
}

func TestKillGrace(t *testing.T) {
	if g := (Spec{}).Grace(); g != DefaultKillGrace {
		t.Errorf("zero grace = %v, want the default", g)
	}
	if g := (Spec{KillGrace: time.Millisecond}).Grace(); g != time.Millisecond {
		t.Errorf("grace = %v", g)
	}
}

func TestDecodeSpec(t *testing.T) {
	good := specJSON(t)
	if s, err := Decode([]byte(good)); err != nil || s.RunID != "run-1" || len(s.Files) != 2 {
		t.Fatalf("Decode(valid) = %+v, %v", s, err)
	}
	for name, in := range map[string]string{
		"empty":          "",
		"not json":       "runId: x",
		"array":          "[]",
		"unknown field":  strings.Replace(good, `"runId"`, `"evil":1,"runId"`, 1),
		"trailing value": good + " {}",
		"wrong type":     strings.Replace(good, `"argv":[`, `"argv":"x","_":[`, 1),
		"truncated":      good[:len(good)/2],
		"invalid spec":   `{"runId":"r","runDir":"/a/b","argv":[],"nonce":"n"}`,
	} {
		if _, err := Decode([]byte(in)); !errors.Is(err, ErrInvalidSpec) {
			t.Errorf("%s: Decode = %v, want ErrInvalidSpec", name, err)
		}
	}
}

func FuzzDecodeSpec(f *testing.F) {
	f.Add(specJSON(f))
	f.Add(`{"runId":"r","runDir":"/a/b","argv":["x"],"nonce":"n","files":{"../a":""}}`)
	f.Add(`{"runId":"r","runDir":"/a/b","argv":["x"],"nonce":"n","network":{"allow":["a"]}}`)
	f.Add(`{"runId":"r"} {}`)
	f.Fuzz(func(t *testing.T, in string) {
		s, err := Decode([]byte(in))
		if err != nil {
			if !errors.Is(err, ErrInvalidSpec) {
				t.Fatalf("Decode error %v does not wrap ErrInvalidSpec", err)
			}
			return
		}
		// Whatever decodes is runnable: valid, and seed paths stay inside.
		if err := s.Validate(); err != nil {
			t.Fatalf("decoded spec is invalid: %v", err)
		}
		for name := range s.Files {
			p, err := SeedPath(name)
			if err != nil || !filepath.IsLocal(p) || p == "." || filepath.Clean(filepath.Join("/ws", p)) == "/ws" ||
				!strings.HasPrefix(filepath.Join("/ws", p), "/ws/") {
				t.Fatalf("seed %q -> %q, %v escapes", name, p, err)
			}
		}
	})
}
