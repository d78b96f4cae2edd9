package main

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/testenv"
)

// TestUsage: the runner refuses anything but "<stage> --spec PATH", and a
// stage that does not exist, with a message and a non-zero exit.
func TestUsage(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "baton-runner")
	if out, err := testenv.Build(exec.Command("go", "build", "-o", bin, ".")); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "usage: baton-runner"},
		{[]string{"runner-outer"}, 2, "usage"},
		{[]string{"runner-outer", "--spec"}, 2, "usage"},
		{[]string{"runner-outer", "-spec", "x"}, 2, "usage"},
		{[]string{"worker", "--spec", "x"}, 1, `no runner stage "worker"`},
		{[]string{"runner-outer", "--spec", "/nonexistent/spec.json"}, 1, "baton-runner:"},
	} {
		out, err := testenv.Output(exec.Command(bin, tc.args...))
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != tc.code || !strings.Contains(string(out), tc.want) {
			t.Errorf("baton-runner %q: %v, %q; want exit %d and %q", tc.args, err, out, tc.code, tc.want)
		}
	}
}

// notLinked are packages the runner must not link. Every run keeps two
// runner processes alive as long as it lasts, and a package's init
// allocates heap that is never given back, in each of them: nats.go and
// its TLS and HTTP, yaml and regexp (all of which came with package
// config) and net/http (the egress proxy's) took baton's PSS per idle run
// to 2.6 MiB. Profile types the runner needs live in sandbox/runspec,
// which imports the standard library only, and the egress proxy reads
// request heads with net/textproto. Package init costs each of a cold
// run's six starts time too, a page fault at a time on a VM: crypto/x509
// and its key types (the egress CA's, given by package sandbox/secrettls
// like its TLS) cost each start about 20 page faults and 1 ms of CPU,
// crypto/rand (journal's nonces, which only the worker makes) 7 faults.
var notLinked = []string{
	"github.com/nats-io/",
	"go.yaml.in/yaml",
	"gopkg.in/yaml",
	"regexp",
	"crypto/tls",
	"crypto/x509",
	"crypto/ecdsa",
	"crypto/rsa",
	"crypto/rand",
	"net/http",
	"github.com/batonhq/baton/config",
	"github.com/batonhq/baton/outputs",
	"github.com/batonhq/baton/internal/unpack",
}

// TestDeps: `go list -deps` of the runner names none of notLinked.
func TestDeps(t *testing.T) {
	out, err := testenv.Build(exec.Command("go", "list", "-deps", "."))
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 || deps[len(deps)-1] != "github.com/batonhq/baton/cmd/baton-runner" {
		t.Fatalf("go list -deps printed no dependency list:\n%s", out)
	}
	for _, d := range deps {
		for _, bad := range notLinked {
			if d == bad || strings.HasPrefix(d, bad) && (strings.HasSuffix(bad, "/") || strings.HasPrefix(d, bad+"/")) {
				t.Errorf("baton-runner links %s (matches %q): every live runner process pays for its package init; "+
					"find the import with `go list -f '{{.ImportPath}}: {{.Imports}}' -deps ./cmd/baton-runner | grep %s`", d, bad, bad)
			}
		}
	}
}
