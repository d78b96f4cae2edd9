package js_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/runtoken"
)

// TestJSClient builds the TypeScript client (@batonhq/client) and runs its
// node:test suite (`npm test`) against the real parts: an embedded
// nats-server of deploy/nats-browser.conf as shipped (users of
// nats-auth.conf, the auth callout for run tokens, a TCP and a WebSocket
// listener on 127.0.0.1, no TLS), a `baton worker` process running baton's
// fake agent, and the run-token issuer answering the callout. The node
// tests connect as the `client` user over TCP, and over WebSocket with a
// run token, as a browser does.
//
// It installs the packages of package-lock.json with `npm ci` (the npm
// registry) into a temporary directory, or into BATON_JS_NPM_DIR, which
// keeps them between runs.
func TestJSClient(t *testing.T) {
	dir, node := testenv.NPMInstall(t, ".", "BATON_JS_NPM_DIR", "tsconfig.json", "src", "test", "testlib")
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatal(err)
	}
	// A browser's WebSocket: Node 22 has one, Node 20 (from 20.10) behind a
	// flag; older ones none.
	var nodeOptions []string
	switch major, minor := nodeVersion(t, node); {
	case major >= 22:
	case major == 20 && minor >= 10 || major == 21:
		nodeOptions = []string{"NODE_OPTIONS=--experimental-websocket"}
	default:
		t.Fatalf("the TypeScript client's tests need Node.js 20.10 or later (%s is %d.%d): install a newer nodejs", node, major, minor)
	}
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := testenv.BatonBinary(t)

	// The server: deploy/nats-browser.conf as shipped, its websocket port
	// substituted, a max payload of 256 KiB so that a line of 600 kB is
	// published in three chunks (a workspace chunk, 128 KiB, still fits).
	seed, pub, err := runtoken.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	pw := map[string]string{"worker": "w-secret", "worker-svc": "s-secret", "client": "c-secret", "viewer": "v-secret", "tools": "t-secret", "console": "k-secret"}
	for user, p := range pw {
		t.Setenv("BATON_"+strings.ToUpper(strings.ReplaceAll(user, "-", "_"))+"_PASSWORD", p)
	}
	t.Setenv("BATON_CALLOUT_ISSUER", pub)
	wsPort := testenv.FreePort(t)
	opts := testenv.ShippedConfig(t, repo, t.TempDir(), "nats-browser.conf", func(conf string) string {
		edited := strings.Replace(conf, `listen: "127.0.0.1:9222"`, fmt.Sprintf(`listen: "127.0.0.1:%d"`, wsPort), 1)
		if edited == conf {
			t.Fatal("deploy/nats-browser.conf no longer has the websocket listen line this test substitutes")
		}
		return edited
	})
	opts.MaxPayload = 256 << 10
	s := testenv.RunShipped(t, opts)
	url := func(user string) string {
		return fmt.Sprintf("nats://%s:%s@%s", user, pw[user], strings.TrimPrefix(s.ClientURL(), "nats://"))
	}

	// The worker, as a process of the real binary.
	state := testenv.StateDir(t)
	cfg := filepath.Join(t.TempDir(), "baton.yaml")
	if err := os.WriteFile(cfg, []byte(workerConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &testenv.Buffer{}
	cmd := exec.Command(bin, "worker", "--nats", url("worker"), "--service-nats", url("worker-svc"),
		"--state-dir", state, "--node", "js", "--log-format", "json", "--config", cfg, "--concurrency", "8")
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
	testenv.WaitFor(t, 30*time.Second, `the worker to log "worker ready"`, func() bool {
		return strings.Contains(logs.String(), "worker ready")
	})

	// The product's host tools, served as the tools user.
	tnc, err := nats.Connect(url("tools"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tnc.Close)
	testenv.NewToolService(t, tnc, protocol.MustNames(""), nil)

	// The console's part: answering the auth callout for run tokens.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cnc, err := nats.Connect(url("console"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cnc.Close)
	iss, err := runtoken.NewIssuer(seed, protocol.MustNames(""))
	if err != nil {
		t.Fatal(err)
	}
	if err := iss.Serve(ctx, cnc); err != nil {
		t.Fatal(err)
	}
	const wsRun = "js-ws-chat"
	token, err := iss.Issue(wsRun, 5*time.Minute, true)
	if err != nil {
		t.Fatal(err)
	}
	readToken, err := iss.Issue(wsRun, 5*time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}

	run := func(what string, timeout time.Duration, args ...string) {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		c := exec.CommandContext(cctx, npm, args...)
		c.Dir = dir
		c.Env = append(os.Environ(), "npm_config_update_notifier=false",
			"BATON_JS_NATS_URL="+url("client"),
			fmt.Sprintf("BATON_JS_WS_URL=ws://127.0.0.1:%d", wsPort),
			"BATON_JS_WS_RUN="+wsRun,
			"BATON_JS_WS_TOKEN="+token,
			"BATON_JS_WS_READ_TOKEN="+readToken,
			"BATON_JS_STATE_DIR="+state,
			"BATON_BIN="+bin,
			// The tests run in a copy of the package: files of the
			// repository (golden streams, docs) are found from here.
			"BATON_JS_REPO="+repo,
		)
		c.Env = append(c.Env, nodeOptions...)
		c.WaitDelay = 5 * time.Second
		start := time.Now()
		out, err := c.CombinedOutput()
		if cctx.Err() != nil {
			t.Fatalf("%s did not end within %v:\n%s", what, timeout, out)
		}
		if err != nil {
			t.Fatalf("%s: %v\n%s", what, err, out)
		}
		t.Logf("%s (%.1fs):\n%s", what, time.Since(start).Seconds(), out)
	}
	run("npm run build", 2*time.Minute, "run", "build")
	run("npm test", 3*time.Minute, "test")
}

// nodeVersion is node's major and minor version.
func nodeVersion(t *testing.T, node string) (major, minor int) {
	t.Helper()
	out, err := testenv.Output(exec.Command(node, "--version"))
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", node, err, out)
	}
	if _, err := fmt.Sscanf(strings.TrimSpace(string(out)), "v%d.%d", &major, &minor); err != nil {
		t.Fatalf("%s --version printed %q: %v", node, out, err)
	}
	return major, minor
}

// workerConfig: baton's fake agent (its arguments from the job), its chat
// mode for input and interrupts, `baton mcp` as an agent of host tools,
// and a shell agent that reads its seeded workspace and leaves outputs.
const workerConfig = `profiles:
  fake:
    command: ["{baton}", fake-agent]
    allowArgs: true
    timeout: 2m
    network: none
  chat:
    command: ["{baton}", fake-agent, --chat]
    stdin: stream
    turnEnd: {field: type, equals: result}
    timeout: 2m
    network: none
  tools:
    command: ["{baton}", mcp]
    timeout: 1m
    network: none
    tools: [deploy, create_pr]
  files:
    command: [/bin/sh, -c, 'mkdir -p out && { cat seed.txt; echo made by the agent; } > out/report.md && printf "{\"read\":\"%s\"}\n" "$(cat seed.txt)"']
    timeout: 1m
    network: none
    outputs:
      diff: true
      files: ["out/**"]
`
