package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/testenv"
)

// StartWorker runs `baton worker` as its own process, stops it with
// SIGINT when the test ends, and returns its log.
func StartWorker(t *testing.T, bin, url, stateDir, node string, args ...string) *testenv.Buffer {
	t.Helper()
	logs, _ := StartWorkerProc(t, bin, url, stateDir, node, args...)
	return logs
}

// StartWorkerProc is StartWorker, also giving the process (to stop or
// signal it). It returns once the worker says it is ready: its streams
// exist, so a job published next has somewhere to go (a submit on a
// loaded machine came before them once: "no response from stream").
func StartWorkerProc(t *testing.T, bin, url, stateDir, node string, args ...string) (*testenv.Buffer, *testenv.Proc) {
	t.Helper()
	logs := &testenv.Buffer{}
	cmd := exec.Command(bin, append([]string{"worker", "--nats", url, "--state-dir", stateDir, "--node", node, "--log-format", "json"}, args...)...)
	cmd.Stdout, cmd.Stderr = logs, logs
	p := testenv.Start(t, cmd)
	t.Cleanup(func() {
		if !p.Stop(os.Interrupt, 15*time.Second) {
			t.Errorf("worker did not stop within 15s of SIGINT")
		}
		if t.Failed() {
			t.Logf("worker logs:\n%s", logs.String())
		}
	})
	testenv.WaitFor(t, 60*time.Second, "worker "+node+" to log \"worker ready\"", func() bool { return strings.Contains(logs.String(), "worker ready") })
	return logs, p
}
