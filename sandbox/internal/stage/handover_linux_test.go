package stage

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/sandbox/internal/chain"
	"github.com/batonhq/baton/sandbox/internal/egress"
	"github.com/batonhq/baton/sandbox/runspec"
	_ "github.com/batonhq/baton/sandbox/secrettls" // the TLS baton's runner stages have
)

// TestHandoverKeepsTheCA: runner-outer-wait serves the proxy of a run
// with secrets with the CA whose certificate runner-outer wrote into the
// sandbox, so the hand-over carries it, key and all, through its JSON.
func TestHandoverKeepsTheCA(t *testing.T) {
	dir := t.TempDir()
	// Each descriptor is the rebuilt runner's own, as after an exec.
	open := func(name string) int {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fd, err := unix.Dup(int(f.Fd()))
		if err != nil {
			t.Fatal(err)
		}
		return fd
	}
	secrets := []runspec.Secret{{Name: "K", Placeholder: strings.Repeat("p", 32), Value: "v", Hosts: []string{"api.example.com"}, Header: runspec.HeaderAPIKey}}
	ca, err := egress.NewCA(egress.SecretHosts(secrets))
	if err != nil {
		t.Fatal(err)
	}
	pemCA, err := ca.MarshalPEM()
	if err != nil {
		t.Fatal(err)
	}
	handover := func(ca string) outerHandover {
		return outerHandover{
			Spec: runspec.Spec{RunDir: dir, Network: runspec.Network{Allow: []string{"api.example.com"}, Secrets: secrets}},
			Lock: open("lock"), Journal: open("journal"), State: -1, Stderr: open("stderr"), StderrPipe: open("stderr-pipe"),
			Input: -1, Stdout: open("stdout"), Status: open("status"), Control: open("control"), Stdin: open("stdin"),
			StdinSource: open("input"), Init: open("init"), Disk: -1, Cgroup: -1, Pool: -1, Tools: -1, ToolsAgent: -1,
			Egress:   []int{open("e0"), open("e1"), open("e2")},
			EgressCA: ca,
		}
	}
	var got outerHandover
	if err := runspec.DecodeStrict(chain.MustJSON(handover(string(pemCA))), &got); err != nil {
		t.Fatal(err)
	}
	o2, err := got.outerRun()
	if err != nil {
		t.Fatal(err)
	}
	if o2.plan.ca == nil || !bytes.Equal(o2.plan.ca.CertPEM(), ca.CertPEM()) {
		t.Fatal("runner-outer-wait has not the CA the sandbox trusts")
	}
	if _, err := egress.NewSecrets(got.Spec.Network, o2.plan.ca); err != nil {
		t.Fatal(err)
	}
	// A hand-over whose CA is damaged fails, saying so.
	if _, err := handover(string(ca.CertPEM())).outerRun(); err == nil || !strings.Contains(err.Error(), "egress CA") {
		t.Errorf("a CA without its key: %v", err)
	}
}
