package stage

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/bounded"
)

func TestPastaFailure(t *testing.T) {
	n := &outerNet{pastaErr: &bounded.Buffer{Limit: 32}}
	_, _ = n.pastaErr.Write([]byte("Failed to open() /dev/net/tun:\n"))
	_, _ = n.pastaErr.Write([]byte(" Permission denied and a great deal more that is cut"))
	_, err := bounded.Output(context.Background(), 10*time.Second, exec.Command("/bin/sh", "-c", "exit 1"))
	got := n.pastaFailure(err)
	if got != "pasta ended: exit status 1: Failed to open() /dev/net/tun:" { // the first 32 bytes, one line
		t.Errorf("pastaFailure = %q", got)
	}
	if n := (&outerNet{pastaErr: &bounded.Buffer{Limit: 8}}).pastaFailure(errors.New("signal: killed")); !strings.HasPrefix(n, "pasta ended: signal: killed") {
		t.Errorf("without output: %q", n)
	}
}
