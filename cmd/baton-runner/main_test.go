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
