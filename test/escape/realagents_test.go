package escape

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"go.yaml.in/yaml/v3"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/bounded"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/test/internal/e2e"
)

// The CLI versions the mock API was written against; the mock follows
// their requests (Codex's code mode, Claude's Bash tool).
const (
	realClaude = "@anthropic-ai/claude-code@2.1.197"
	realCodex  = "@openai/codex@0.171.0"
	// realMount is where the npm prefix is bound inside the sandbox.
	realMount = "/opt/npm"
	mockName  = "api.mock.test"
)

// TestRealAgents runs the real Claude Code and Codex CLIs, installed from
// npm as a new user would, through the claude and codex profiles of
// deploy/baton.example.yaml as written, in baton's sandbox, against a mock
// model API served over HTTPS on a test host (a network namespace of its
// own: the worker's own host is unreachable from the sandbox by design).
// Their API keys are the profiles' secrets: the mock receives each key's
// value in the header the CLI sends it in, while the agent's environment
// holds a placeholder and the agent's search of what it can read (files,
// /proc; secretSearch, run by the CLI's own tool) and the run's chain
// find no value. Each CLI must run its tool inside the sandbox (proof.txt
// written in the workspace and its output sent back to the API) and the
// run must succeed. The claude-tools profile's Claude calls a host tool,
// served by the test as a product would, through baton mcp. Then the
// claude-chat recipe of docs/interactive.md runs as written
// (claudeChatRecipe), and the gateway recipe of docs/real-agents.md
// (gatewayRecipe).
//
// It installs about 650 MB from the npm registry (a minute or so; npm is
// installed by test/run.sh); BATON_REAL_AGENTS_DIR=DIR keeps the install
// in DIR across runs.
func TestRealAgents(t *testing.T) {
	escapeNeeds(t, "real agents test")
	prefix := realInstall(t)
	api := &mockAPI{}
	// The test host is the mock's network namespace; the mock is served
	// there over HTTPS only, with a certificate of a CA made for the test
	// (the profiles' upstreamCA), as a gateway with an internal CA is.
	host := testenv.NewTestHost(t, http.NotFoundHandler())
	port, upstreamCA := serveTestHostTLS(t, host, api, mockName)
	base := fmt.Sprintf("https://%s:%d", mockName, port)
	keys := map[string]string{"ANTHROPIC_API_KEY": realKey("sk-ant-"), "CODEX_API_KEY": realKey("sk-")}

	cfg := realProfiles(t, prefix, host, upstreamCA, keys, map[string]map[string]string{
		"claude": {"ANTHROPIC_BASE_URL": base},
		"codex":  {},
		// docs/interactive.md's recipe runs it.
		"claude-chat":  {"ANTHROPIC_BASE_URL": base},
		"claude-tools": {"ANTHROPIC_BASE_URL": base},
	})
	// Codex reads its provider from $CODEX_HOME/config.toml, in HOME: the
	// job seeds it (a file under ~/), as a user pointing Codex at a
	// gateway would. A provider of its own also spares Codex's WebSocket
	// attempts, which the built-in one makes first.
	codexConfig := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(codexConfig, fmt.Appendf(nil, "model_provider = \"mock\"\n\n[model_providers.mock]\nname = \"mock\"\nbase_url = %q\nenv_key = \"CODEX_API_KEY\"\n", base+"/v1"), 0o644); err != nil {
		t.Fatal(err)
	}

	if err := addClaudePolicy(cfg); err != nil {
		t.Fatal(err)
	}
	bin := testenv.BatonBinary(t)
	s := testenv.RunServer(t)
	_, js := testenv.Connect(t, s)
	stateDir := testenv.StateDir(t)
	e2e.StartWorker(t, bin, s.ClientURL(), stateDir, "real", "--config", cfg)
	// Its person answers after a minute: it runs beside the other cases.
	policyDone := make(chan []string, 1)
	go func() { policyDone <- claudePolicy(api, bin, s.ClientURL(), stateDir) }()

	claudeCreds, codexCreds := mockCreds(keys["ANTHROPIC_API_KEY"], ""), mockCreds("", "Bearer "+keys["CODEX_API_KEY"])
	for _, tc := range []struct {
		profile string
		args    []string
		want    []string // in what `baton submit --watch` prints
		secret  string   // the profile's API key
		creds   string   // how the mock must receive it (mockCreds)
	}{
		{"claude", nil, []string{"→ Bash: " + mockCommand("claude"), mockDone, "● succeeded"},
			"ANTHROPIC_API_KEY", claudeCreds},
		{"codex", []string{"--file", "~/.codex/config.toml=" + codexConfig}, []string{"→ shell: ", mockCommand("codex"), mockDone, "● succeeded"},
			"CODEX_API_KEY", codexCreds},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			runID := "real-" + tc.profile
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			args := append([]string{"submit", "--nats", s.ClientURL(), "--profile", tc.profile, "--run-id", runID,
				"--input", "Write proof.txt.", "--watch"}, tc.args...)
			before := len(api.credentials())
			var out bytes.Buffer
			submit := bounded.Command(ctx, bin, args...)
			submit.Stdout, submit.Stderr = &out, &out
			err := submit.Run()
			run := filepath.Join(stateDir, "runs", runID)
			if err != nil {
				stderr, _ := os.ReadFile(filepath.Join(run, "stderr.log"))
				state, _ := os.ReadFile(filepath.Join(run, "state.ndjson"))
				t.Fatalf("submit --watch: %v\n%s\nstderr.log:\n%s\nstate.ndjson:\n%s\nmock saw %q", err, out.String(), stderr, state, api.requests())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("submit --watch printed no %q:\n%s", w, out.String())
				}
			}
			// The tool ran inside the sandbox, as the agent: it wrote the
			// workspace and its output went back to the API.
			got := t.TempDir()
			if out, err := bounded.Command(ctx, bin, "outputs", "--nats", s.ClientURL(), runID, "--get", "all", "-o", got).CombinedOutput(); err != nil {
				t.Fatalf("baton outputs --get all: %v\n%s", err, out)
			}
			proof, err := os.ReadFile(filepath.Join(got, "files", "proof.txt"))
			if want := "written by " + tc.profile + "\n"; err != nil || string(proof) != want {
				t.Errorf("workspace/proof.txt = %q, %v; want %q", proof, err, want)
			}
			var result string
			for _, r := range api.toolResults() {
				if text := commandOutput(resultText(r)); strings.Contains(text, "written by "+tc.profile) {
					result = text
				}
			}
			if result == "" {
				t.Errorf("the API got no tool result with the command's output: %q", api.toolResults())
			}
			// The key: the mock received its value, in the CLI's own
			// header, on every request; the agent found none of it. The
			// claude-policy case's run goes on meanwhile, so each request
			// is held to the credentials of the API it called: Claude's
			// Messages, Codex's Responses.
			paths, creds := api.requests()[before:], api.credentials()[before:]
			mine := 0
			for i := range min(len(paths), len(creds)) {
				want := creds[i] // another probe: either CLI's whole
				switch {
				case strings.Contains(paths[i], "/v1/messages"):
					want = claudeCreds
				case strings.Contains(paths[i], "/v1/responses"):
					want = codexCreds
				}
				if creds[i] != want || want != claudeCreds && want != codexCreds {
					t.Errorf("%s: the mock received the credentials %q, want %q", paths[i], creds[i], want)
				}
				if creds[i] == tc.creds {
					mine++
				}
			}
			if mine == 0 {
				t.Errorf("no request of the %s case's API: %q", tc.profile, paths)
			}
			t.Logf("the agent's search:\n%s", result)
			checkSecretSearch(t, result, tc.secret)
			realChain(t, readRun(t, js, protocol.MustNames(""), stateDir, runID, 30*time.Second), keys, tc.secret)
			// What the allowlist refused (Codex calls home) is recorded as
			// refused, never as ok.
			state, _ := os.ReadFile(filepath.Join(run, "state.ndjson"))
			refused := 0
			for line := range bytes.Lines(state) {
				var r struct{ Phase, Status, Detail string }
				if json.Unmarshal(line, &r) != nil || !strings.Contains(r.Detail, "not on the allowlist") {
					continue
				}
				if refused++; r.Status != "refused" {
					t.Errorf("state.ndjson records a refusal as %q: %s", r.Status, line)
				}
			}
			if tc.profile == "codex" && refused == 0 {
				t.Errorf("Codex 0.171 calls chatgpt.com and github.com, yet state.ndjson records no refusal:\n%s", state)
			}
		})
	}
	t.Run("claude-tools", func(t *testing.T) {
		claudeTools(t, api, s, js, bin, stateDir, keys)
	})
	t.Run("claude-chat-recipe", func(t *testing.T) { claudeChatRecipe(t, api, bin, s.ClientURL()) })
	t.Run("gateway-recipe", func(t *testing.T) { gatewayRecipe(t, prefix, bin) })
	t.Run("claude-session", func(t *testing.T) { sessionAcrossNodes(t, api, bin, cfg, "claude", nil) })
	t.Run("codex-session", func(t *testing.T) {
		b, err := os.ReadFile(codexConfig)
		if err != nil {
			t.Fatal(err)
		}
		sessionAcrossNodes(t, api, bin, cfg, "codex", map[string]string{"~/.codex/config.toml": string(b)})
	})
	t.Run(claudePolicyProfile, func(t *testing.T) {
		for _, p := range <-policyDone {
			t.Error(p)
		}
	})
}

// realKey is a test API key: prefix, random, then escapeSecretMarker,
// which secretSearch looks for.
func realKey(prefix string) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b) + "-" + escapeSecretMarker
}

// commandOutput is the command's output in a tool result's text: Codex's
// code mode wraps it in a JSON object (its "output"), on a line of its
// own after the script's summary; any other text is the output itself.
func commandOutput(text string) string {
	for line := range strings.Lines(text) {
		var r struct{ Output *string }
		if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &r) == nil && r.Output != nil {
			return *r.Output
		}
	}
	return text
}

// realChain checks a run's chain (readRun): no key's value in its lines,
// egress messages or state records, and an egress message of a
// connection to the mock with the secret named secret put in.
func realChain(t *testing.T, r escapeRun, keys map[string]string, secret string) {
	t.Helper()
	for name, v := range keys {
		for what, text := range map[string]string{"chain's lines and records": string(r.events), "state.ndjson": r.state} {
			if strings.Contains(text, v) {
				t.Errorf("ESCAPE: the run's %s hold %s's value", what, name)
			}
		}
	}
	swapped := false
	for _, e := range r.egress {
		swapped = swapped || e.Allowed && e.Host == mockName && e.Secret == secret
	}
	if !swapped {
		t.Errorf("no egress message of the run names %s put in a request to %s: %+v", secret, mockName, r.egress)
	}
}

// realProfiles writes a worker config holding the named profiles of
// deploy/baton.example.yaml, changed only where this machine differs from
// a user's: the CLIs sit under the npm prefix mounted at /opt/npm instead
// of /usr, the API is the mock on host (the variables in env, per
// profile; each secret's value from keys, for the mock's host, whose CA
// is upstreamCA), a run lasts at most 2 minutes, and proof.txt is
// captured. It returns the config's path.
func realProfiles(t *testing.T, prefix string, host *testenv.TestHost, upstreamCA string, keys map[string]string, env map[string]map[string]string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "baton.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var example struct {
		Profiles map[string]map[string]any `yaml:"profiles"`
	}
	if err := yaml.Unmarshal(raw, &example); err != nil {
		t.Fatal(err)
	}
	profiles := map[string]any{}
	for name, extra := range env {
		p := example.Profiles[name]
		if p == nil {
			t.Fatalf("deploy/baton.example.yaml has no %s profile", name)
		}
		env := map[string]any{"PATH": realMount + "/bin:/usr/local/bin:/usr/bin:/bin"}
		profileEnv, _ := p["env"].(map[string]any) // codex has none
		for k, v := range profileEnv {
			env[k] = v
		}
		for k, v := range extra {
			env[k] = v
		}
		p["env"] = env
		secrets, _ := p["secrets"].(map[string]any)
		if len(secrets) == 0 {
			t.Fatalf("deploy/baton.example.yaml's %s profile has no secrets: the test runs its agents with their keys as secrets", name)
		}
		for k, v := range secrets {
			s := v.(map[string]any)
			if keys[k] == "" {
				t.Fatalf("no test key for profile %s's secret %s", name, k)
			}
			s["value"], s["hosts"] = keys[k], []any{mockName}
		}
		p["upstreamCA"] = upstreamCA
		p["mounts"] = []any{map[string]any{"source": prefix, "target": realMount}}
		p["network"] = map[string]any{"allow": []any{mockName, host.Prefix.String()}, "hosts": map[string]any{mockName: host.Addr.String()}}
		// The test host's CIDR entry is set up per run: no pool.
		delete(p, "pool")
		p["timeout"] = "2m"
		// What the tool wrote is read from the capture: a root worker gives
		// a finished run's workspace back.
		p["outputs"] = map[string]any{"files": []any{"proof.txt"}}
		profiles[name] = p
	}
	cfgBytes, err := yaml.Marshal(map[string]any{"profiles": profiles})
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "baton.yaml")
	if err := os.WriteFile(cfg, cfgBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// realInstall installs the CLIs with `npm install -g` under a prefix the
// sandbox uid can read (BATON_REAL_AGENTS_DIR, or a temporary one) and
// returns it; an install already there is reused.
func realInstall(t *testing.T) string {
	t.Helper()
	prefix := os.Getenv("BATON_REAL_AGENTS_DIR")
	if prefix == "" {
		prefix = escapeTempDir(t, "baton-real-agents-", 0o755)
	} else if err := os.MkdirAll(prefix, 0o755); err != nil {
		t.Fatal(err)
	}
	_, errClaude := os.Stat(filepath.Join(prefix, "bin", "claude"))
	_, errCodex := os.Stat(filepath.Join(prefix, "bin", "codex"))
	if errClaude == nil && errCodex == nil {
		return prefix
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatal("the real agents test installs the CLIs with npm: apt-get install npm (or Node.js 18+ with npm)")
	}
	start := time.Now()
	cmd := exec.Command(npm, "install", "-g", "--prefix", prefix, "--no-audit", "--no-fund", realClaude, realCodex)
	cmd.Env = append(os.Environ(), "npm_config_update_notifier=false")
	// Longer than a test step's bound: 650 MB from the registry.
	if out, err := bounded.Output(context.Background(), 6*time.Minute, cmd); err != nil {
		t.Fatalf("npm install (needs the npm registry): %v\n%s", err, out)
	}
	t.Logf("npm install -g %s %s: %v", realClaude, realCodex, time.Since(start).Round(time.Second))
	return prefix
}

// claudeChatRecipe runs the claude-chat recipe of docs/interactive.md as
// written (submit, a follow-up, an interrupt, --eof, watch) against the
// real Claude Code CLI through the example's claude-chat profile, on the
// worker at url, and checks what the page says happens: the interrupt
// stops the first turn (a result of error_during_execution, the run
// waiting), the follow-up is answered with the whole conversation, a tool
// use after the end of input fails for want of a permission prompt, and
// the run succeeds, `baton watch` exiting 0.
func claudeChatRecipe(t *testing.T, api *mockAPI, bin, url string) {
	blocks := e2e.DocBlocks(t, "../../docs/interactive.md", "claude-chat")
	if len(blocks) != 1 {
		t.Fatalf("docs/interactive.md marks %d claude-chat blocks, want 1", len(blocks))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sh := bounded.Command(ctx, "/bin/sh", "-ec", blocks[0].Script)
	sh.Env = append(os.Environ(), "NATS_URL="+url, "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))
	b, err := sh.CombinedOutput()
	out := string(b)
	if err != nil {
		t.Fatalf("the claude-chat recipe of docs/interactive.md: %v (the page says it succeeds)\n%s\nmock saw %q", err, out, api.requests())
	}
	if want := []string{"↳ the agent took request baton-interrupt", "■ error error_during_execution", "■ done success", "● succeeded"}; !testenv.InOrder(out, want...) {
		t.Errorf("the recipe printed no %q, in that order:\n%s", want, out)
	}
	// The page tells two cases apart: the lines all reach Claude before it
	// reads (the commands back to back, as here), or, on a machine so slow
	// that Claude was already waiting on the first turn's permission
	// prompt, the interrupt withdraws the prompt.
	prompts := api.userPrompts()
	last := ""
	if len(prompts) > 0 {
		last = prompts[len(prompts)-1]
	}
	if testenv.InOrder(out, "withdrawn: the agent no longer waits for its answer", "↳ [Request interrupted by user for tool use]") {
		t.Logf("the interrupt withdrew the first turn's permission prompt (the page's second case)")
		return
	}
	// The end of input came before the first turn's end: no turn is a
	// wait then.
	if testenv.InOrder(out, "you › end of input", "■ error error_during_execution") && strings.Contains(out, "● waiting") {
		t.Errorf("the run showed waiting after its end of input:\n%s", out)
	}
	if !testenv.InOrder(last, "Fix the failing test", "[Request interrupted by user]", "Now add a test for it") {
		t.Errorf("the API's last request holds no first message, interruption and follow-up, in that order: %q", prompts)
	}
	if !hasResult(api.toolResults(), "Tool permission request failed: Error: Stream closed") {
		t.Errorf("a tool use after --eof did not fail for want of a permission prompt, as the page says: tool results %q", api.toolResults())
	}
}

// gatewayRecipe sets up the gateway's network namespace of
// docs/real-agents.md with the page's commands as written, serves the
// mock API in it where the page's gateway listens, and runs the page's
// claude profile, its network as written, on a worker of its own: Claude
// reaches the gateway from the sandbox, runs its tool, and the run
// succeeds. Only where the CLI sits differs (the npm prefix under
// /opt/npm).
func gatewayRecipe(t *testing.T, prefix, bin string) {
	setup := e2e.DocBlocks(t, "../../docs/real-agents.md", "gateway-netns")
	profile := e2e.DocBlocks(t, "../../docs/real-agents.md", "gateway-profile")
	if len(setup) != 1 || len(profile) != 1 {
		t.Fatalf("docs/real-agents.md marks %d gateway-netns and %d gateway-profile blocks, want 1 each", len(setup), len(profile))
	}
	// The page's names: removed when the test ends, however far the
	// commands got.
	t.Cleanup(func() {
		_, _ = testenv.Output(exec.Command("ip", "netns", "del", "llm"))
		_, _ = testenv.Output(exec.Command("ip", "link", "del", "llm-host"))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := bounded.Command(ctx, "/bin/sh", "-ec", setup[0].Script).CombinedOutput(); err != nil {
		t.Fatalf("the gateway-netns commands of docs/real-agents.md (is a namespace llm or a link llm-host left from elsewhere?): %v\n%s", err, out)
	}
	l, err := testenv.ListenIn("llm", "10.213.0.2:8080")
	if err != nil {
		t.Fatalf("listen on the page's gateway address in namespace llm: %v", err)
	}
	api := &mockAPI{}
	srv := &http.Server{Handler: api}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })

	var profiles map[string]map[string]any
	if err := yaml.Unmarshal([]byte(profile[0].Script), &profiles); err != nil {
		t.Fatalf("docs/real-agents.md's gateway profile: %v", err)
	}
	p := profiles["claude"]
	if p == nil {
		t.Fatalf("docs/real-agents.md's gateway profile is not named claude: %v", profiles)
	}
	p["env"].(map[string]any)["PATH"] = realMount + "/bin:/usr/local/bin:/usr/bin:/bin"
	p["mounts"] = []any{map[string]any{"source": prefix, "target": realMount}}
	cfgBytes, err := yaml.Marshal(map[string]any{"profiles": profiles})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := config.Parse(cfgBytes); err != nil {
		t.Fatalf("docs/real-agents.md's gateway profile is refused: %v", err)
	}
	cfg := filepath.Join(t.TempDir(), "baton.yaml")
	if err := os.WriteFile(cfg, cfgBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	s := testenv.RunServer(t)
	e2e.StartWorker(t, bin, s.ClientURL(), testenv.StateDir(t), "gw", "--config", cfg)
	out, err := bounded.Command(ctx, bin, "submit", "--nats", s.ClientURL(), "--profile", "claude", "--run-id", "gateway",
		"--input", "Write proof.txt.", "--watch").CombinedOutput()
	if err != nil {
		t.Fatalf("submit --watch through the gateway: %v\n%s\nmock saw %q", err, out, api.requests())
	}
	for _, want := range []string{"→ Bash: " + mockCommand("claude"), mockDone, "● succeeded"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("submit --watch printed no %q:\n%s", want, out)
		}
	}
	if !hasResult(api.toolResults(), "written by claude") {
		t.Errorf("the gateway got no tool result with the command's output: %q", api.toolResults())
	}
}

// sessionAcrossNodes runs two turns of one session with profile as
// written in deploy/baton.example.yaml (its session.resumeArgs: Claude's
// --continue, codex exec's resume --last), each on a worker of another
// node with a state directory of its own, the first node's worker stopped
// before the second turn; the first turn seeds files (Codex's provider
// in ~/.codex/config.toml), which the second finds in the home the
// checkpoint restored: the second turn's first request to the API
// carries the first turn's prompt, which the CLI found in its home.
func sessionAcrossNodes(t *testing.T, api *mockAPI, bin, cfg, profile string, files map[string]string) {
	s := testenv.RunServer(t)
	_, js := testenv.Connect(t, s)
	c, err := client.New(js, protocol.MustNames(""))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	session := profile + "-session"
	turn := func(runID, input string, files map[string]string) {
		t.Helper()
		job := protocol.Job{RunID: runID, Profile: profile, Input: input, Files: files}
		if err := c.Submit(ctx, job, client.WithSession(session)); err != nil {
			t.Fatal(err)
		}
		watch := bounded.Command(ctx, bin, "watch", "--nats", s.ClientURL(), runID)
		if out, err := watch.CombinedOutput(); err != nil || !strings.Contains(string(out), "● succeeded") {
			t.Fatalf("turn %s: %v\n%s\nmock saw %q", runID, err, out, api.requests())
		}
	}
	_, a := e2e.StartWorkerProc(t, bin, s.ClientURL(), testenv.StateDir(t), "node-a", "--config", cfg)
	first, second := profile+"-turn-1", profile+"-turn-2"
	turn(first, "Write proof.txt, first turn.", files)
	if !a.Stop(syscall.SIGTERM, 30*time.Second) {
		t.Fatal("node a's worker did not stop")
	}
	e2e.StartWorker(t, bin, s.ClientURL(), testenv.StateDir(t), "node-b", "--config", cfg)
	before := len(api.requestBodies())
	turn(second, "Now the second turn.", nil)
	// The second turn's first request: the mock also serves the
	// claude-policy case, whose run goes on meanwhile (its requests came in
	// between once, on a loaded machine).
	var bodies []string
	for _, b := range api.requestBodies()[before:] {
		if strings.Contains(b, "Now the second turn.") {
			bodies = append(bodies, b)
		}
	}
	if len(bodies) == 0 || !testenv.InOrder(bodies[0], "Write proof.txt, first turn.", "Now the second turn.") {
		t.Fatalf("the second turn's first request holds no first turn before it (the conversation did not follow the session): %.2000q", api.requestBodies()[before:])
	}
	// The session's head moves once the run's terminal status is out,
	// which watch ended on.
	var rec kv.SessionRecord
	testenv.WaitFor(t, 10*time.Second, "the session's head to be the second turn's checkpoint", func() bool {
		var err error
		rec, err = c.Session(ctx, session)
		return err == nil && rec.Live == "" && rec.Head() != nil && rec.Head().Run == second
	})
	if rec.RunCount != 2 || !slices.Equal(rec.Runs, []string{first, second}) {
		t.Fatalf("session record %+v", rec)
	}
}

// claudeTools runs the example's claude-tools profile (keyless, with the
// host tool create_pr; docs/real-agents.md's recipe is the same profile)
// on the worker of TestRealAgents: the test serves create_pr as a
// product would (a NATS micro service, the schema and description in the
// endpoint's metadata), the mock's first answer is a tool_use of the
// tool as Claude Code names it (mcp__baton__create_pr), Claude calls it
// through baton mcp, the service gets the call with the run's identity,
// and the mock's next request carries the service's answer.
func claudeTools(t *testing.T, api *mockAPI, s *server.Server, js jetstream.JetStream, bin, stateDir string, keys map[string]string) {
	realRecipeIsExample(t, "keyless-tools-profile", "claude-tools")
	const answer = "opened pull request #7"
	var mu sync.Mutex
	var calls []*nats.Msg // what the service got: headers and arguments
	nc, _ := testenv.Connect(t, s)
	svc, err := micro.AddService(nc, micro.Config{Name: "product-tools", Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	names := protocol.MustNames("")
	if err := svc.AddEndpoint("create_pr", micro.HandlerFunc(func(req micro.Request) {
		mu.Lock()
		calls = append(calls, &nats.Msg{Header: nats.Header(req.Headers()), Data: req.Data()})
		mu.Unlock()
		_ = req.Respond([]byte(answer))
	}), micro.WithEndpointSubject(names.ToolSubject("create_pr")), micro.WithEndpointMetadata(map[string]string{
		protocol.ToolMetaDescription: "Open a pull request from the run's branch",
		protocol.ToolMetaSchema:      `{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}`,
	})); err != nil {
		t.Fatal(err)
	}

	runID := "real-claude-tools"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	before := len(api.mcpCalls())
	out, err := bounded.Command(ctx, bin, "submit", "--nats", s.ClientURL(), "--profile", "claude-tools", "--run-id", runID,
		"--input", "Open a pull request.", "--watch").CombinedOutput()
	if err != nil {
		stderr, _ := os.ReadFile(filepath.Join(stateDir, "runs", runID, "stderr.log"))
		t.Fatalf("submit --watch: %v\n%s\nstderr.log:\n%s\nmock saw %q", err, out, stderr, api.requests())
	}
	for _, want := range []string{"→ " + mockMCPPrefix + "create_pr", mockDone, "● succeeded"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("submit --watch printed no %q:\n%s", want, out)
		}
	}
	if got := api.mcpCalls()[before:]; !slices.Equal(got, []string{mockMCPPrefix + "create_pr"}) {
		t.Errorf("the mock called the MCP tools %q; Claude offered them as %q", got, mockMCPPrefix+"create_pr")
	}
	mu.Lock()
	got := slices.Clone(calls)
	mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("the service got %d calls, want 1", len(got))
	}
	h := got[0].Header
	if string(got[0].Data) != mockToolArgs || h.Get(protocol.HeaderToolRunID) != runID || h.Get(protocol.HeaderToolProfile) != "claude-tools" ||
		h.Get(protocol.HeaderIdempotencyKey) != runID+":1" {
		t.Errorf("the service got %s with headers %v; want %s from run %s, profile claude-tools, call 1", got[0].Data, h, mockToolArgs, runID)
	}
	if !hasResult(api.toolResults(), answer) {
		t.Errorf("the mock's next request carried no tool_result with the service's answer: %q", api.toolResults())
	}
	r := readRun(t, js, names, stateDir, runID, 30*time.Second)
	realChain(t, r, keys, "ANTHROPIC_API_KEY")
	var phases []string
	for _, m := range r.tools {
		phases = append(phases, m.Phase+" "+m.Name)
	}
	if !slices.Equal(phases, []string{"call create_pr", "result create_pr"}) {
		t.Errorf("the run's tool messages: %+v, want the call and its result", r.tools)
	}
}

// realRecipeIsExample checks that the profile of docs/real-agents.md's
// block marked name is the example's profile: the page's recipe is what
// the test runs.
func realRecipeIsExample(t *testing.T, name, profile string) {
	t.Helper()
	blocks := e2e.DocBlocks(t, "../../docs/real-agents.md", name)
	var page map[string]any
	if err := yaml.Unmarshal([]byte(blocks[0].Script), &page); err != nil {
		t.Fatalf("docs/real-agents.md's %s block: %v", name, err)
	}
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "baton.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var example struct {
		Profiles map[string]any `yaml:"profiles"`
	}
	if err := yaml.Unmarshal(raw, &example); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(page[profile], example.Profiles[profile]) {
		t.Errorf("docs/real-agents.md's %s profile differs from deploy/baton.example.yaml's:\npage    %v\nexample %v", profile, page[profile], example.Profiles[profile])
	}
}
