package test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/bounded"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/test/internal/e2e"
)

// TestQuickstart walks docs/quickstart.md as written: its marked blocks,
// in order, in the repository's root as a clone's, with nats-server built
// from go.mod's version and the nats CLI the tests use on PATH. Blocks
// that keep running (nats-server, the worker, the console) are started
// and left running; the others must exit 0, and print what the page says.
// Only what this machine has differently is changed: free ports for the
// defaults 4222 and 8233 (NATS_URL names the server), HOME and the state
// directory in temporary ones. Then the console lists the runs.
func TestQuickstart(t *testing.T) {
	const page = "../docs/quickstart.md"
	doc, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	server := regexp.MustCompile(`github.com/nats-io/nats-server/v2 (v\S+)`).FindSubmatch(gomod)
	if server == nil {
		t.Fatal("go.mod requires no github.com/nats-io/nats-server/v2")
	}
	for _, install := range []string{"go install github.com/nats-io/nats-server/v2@" + string(server[1]), "go install " + natsCLIModule} {
		if !bytes.Contains(doc, []byte(install)) {
			t.Errorf("%s does not say %q, the version the tests run", page, install)
		}
	}
	natsCLIBin := natsCLI(t)
	bin := testenv.BatonBinary(t)
	serverDir := t.TempDir()
	build := exec.Command("go", "build", "-o", serverDir, "github.com/nats-io/nats-server/v2")
	build.Dir = ".."
	if out, err := testenv.Build(build); err != nil {
		t.Fatalf("build nats-server from go.mod: %v\n%s", err, out)
	}

	port, consolePort := testenv.FreePort(t), testenv.FreePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	subst := strings.NewReplacer(
		"nats-server -js", fmt.Sprintf("nats-server -js -a 127.0.0.1 -p %d", port),
		"baton console", fmt.Sprintf("baton console --listen 127.0.0.1:%d", consolePort))
	env := append(os.Environ(), "HOME="+t.TempDir(), "NATS_URL="+url, "BATON_STATE_DIR="+testenv.StateDir(t),
		"PATH="+strings.Join([]string{serverDir, filepath.Dir(natsCLIBin), filepath.Dir(bin), os.Getenv("PATH")}, ":"))

	out, logs := walkBlocks(t, page, "quickstart", subst, env, url)
	consoleOut, workerOut := logs["baton console"], logs["baton worker"]
	// What the page says the blocks print.
	for _, want := range [][]string{
		{`{"words":3}`, "● succeeded"},
		{"Fix the failing test", "● succeeded"},
		{`{"words":4}`, "● succeeded"}, // hello-1, from the nats CLI
		{"echo: hello", "echo: a second turn", "● succeeded"},
		{"hello-1"}, // baton runs list
	} {
		if !testenv.InOrder(out, want...) {
			t.Errorf("the blocks of %s printed no %q, in that order:\n%s", page, want, out)
		}
	}
	// baton doctor passed (it exits non-zero on a FAIL), and the sandbox
	// finds every profile's command.
	for _, p := range []string{"chat", "demo", "wc"} {
		if !regexp.MustCompile(`(?m)^ok +profile ` + p + ` `).MatchString(out) {
			t.Errorf("baton doctor --config deploy/baton.yaml did not say ok for profile %s:\n%s", p, out)
		}
	}
	// The worker logged what the page says: ready, and one warning, about
	// its service's NATS connection.
	var warnings []string
	for l := range strings.Lines(workerOut.String()) {
		if strings.Contains(l, `"level":"warn"`) || strings.Contains(l, `"level":"error"`) {
			warnings = append(warnings, l)
		}
	}
	if !strings.Contains(workerOut.String(), `"message":"worker ready"`) || len(warnings) != 1 ||
		!strings.Contains(warnings[0], "the micro service answers on the main connection") {
		t.Errorf("the worker logged warnings %q, want the one %s names (and worker ready):\n%s", warnings, page, workerOut.String())
	}
	// The console the page opens lists the runs.
	m := regexp.MustCompile(`http://\S+/\?token=(\S+)`).FindStringSubmatch(consoleOut.String())
	if m == nil {
		t.Fatalf("baton console printed no URL with a token:\n%s", consoleOut.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/api/runs", consolePort), nil)
	req.Header.Set("Authorization", "Bearer "+m[1])
	var body []byte
	testenv.WaitFor(t, 30*time.Second, "the console's api/runs to list run hello-1", func() bool {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ = io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && bytes.Contains(body, []byte(`"hello-1"`))
	})

	// The config the page starts from is the one shipped, and parses.
	if _, err := config.Load("../deploy/baton.yaml"); err != nil {
		t.Fatal(err)
	}
}

// walkBlocks runs the blocks of page marked name, in order, from the
// repository's root, each changed by subst, with env: the blocks that
// keep running (nats-server, a worker, the console) are started, waited
// for as the next block needs them (a server takes connections, a
// worker's streams exist on url, the console printed its URL) and left
// running until the test ends; the others must exit 0. It returns what
// those printed, and the logs of the ones left running, by their first
// two words.
func walkBlocks(t *testing.T, page, name string, subst *strings.Replacer, env []string, url string) (string, map[string]*testenv.Buffer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var printed strings.Builder
	logs := map[string]*testenv.Buffer{}
	for i, b := range e2e.DocBlocks(t, page, name) {
		script := subst.Replace(b.Script)
		if !b.KeepsRunning {
			sh := bounded.Command(ctx, "/bin/sh", "-ec", script)
			sh.Dir, sh.Env = "..", env
			out, err := sh.CombinedOutput()
			if err != nil {
				t.Fatalf("block %d of %s: %v\n%s\n%s", i+1, page, err, script, out)
			}
			printed.Write(out)
			continue
		}
		line := strings.TrimSpace(script)
		if strings.Contains(line, "\n") {
			t.Fatalf("block %d of %s keeps running, so it is one command: %q", i+1, page, line)
		}
		words := strings.Fields(line)
		logsOf := &testenv.Buffer{}
		logs[strings.Join(words[:min(2, len(words))], " ")] = logsOf
		cmd := exec.Command("/bin/sh", "-c", "exec "+line)
		cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = "..", env, logsOf, logsOf
		p := testenv.Start(t, cmd)
		t.Cleanup(func() {
			if !p.Stop(os.Interrupt, 15*time.Second) {
				t.Errorf("%s did not stop within 15s of SIGINT", line)
			}
			if t.Failed() {
				t.Logf("%s:\n%s", line, logsOf.String())
			}
		})
		// What the next block needs of this one.
		switch {
		case strings.HasPrefix(line, "nats-server"):
			addr := strings.TrimPrefix(url, "nats://")
			testenv.WaitFor(t, 30*time.Second, "nats-server to take connections at "+addr, func() bool {
				c, err := net.DialTimeout("tcp", addr, time.Second)
				if err == nil {
					c.Close()
				}
				return err == nil
			})
		case strings.HasPrefix(line, "baton worker"):
			// A worker of its own server (--embedded) starts it first.
			nc, err := nats.Connect(url, nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			waitStream(t, js, protocol.MustNames("").JobsStream())
		case strings.HasPrefix(line, "baton console"):
			testenv.WaitFor(t, 30*time.Second, "the console to print its URL", func() bool {
				return strings.Contains(logsOf.String(), "?token=")
			})
		default:
			t.Fatalf("block %d of %s keeps running, and this test knows not when it is ready: %q", i+1, page, line)
		}
	}
	return printed.String(), logs
}

// TestReadmeCLI runs the README's "Submit and watch from the CLI" as
// written: a worker with its embedded server in a terminal of its own,
// then the submits and watches, which must print each run succeeded. Only
// the server's port is another than the page's 4222.
func TestReadmeCLI(t *testing.T) {
	bin := testenv.BatonBinary(t)
	port := testenv.FreePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	subst := strings.NewReplacer("baton worker --embedded", fmt.Sprintf("baton worker --embedded --embedded-port %d", port))
	env := append(os.Environ(), "NATS_URL="+url, "BATON_STATE_DIR="+testenv.StateDir(t),
		"PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))
	out, logs := walkBlocks(t, "../README.md", "readme-cli", subst, env, url)
	if !testenv.InOrder(out, "you › Fix the failing test", "● succeeded", "you › hello", "● succeeded") {
		t.Errorf("the README's CLI blocks printed no two runs succeeded:\n%s", out)
	}
	if !strings.Contains(logs["baton worker"].String(), "worker ready") {
		t.Errorf("the worker did not log worker ready, as the README says:\n%s", logs["baton worker"].String())
	}
}
