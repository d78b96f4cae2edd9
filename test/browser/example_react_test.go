package browser

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/console"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox"
	"github.com/batonhq/baton/test/internal/e2e"
)

// TestReactChatExample runs examples/react-chat as its README says (npm
// install, npm start: an esbuild bundle of a React page on TanStack AI's
// useChat, and its server) against a real console and worker, and chats
// in headless Chromium: two messages on one session, each answered by
// the agent, both taken by the session's one live run.
func TestReactChatExample(t *testing.T) {
	browser := e2e.Chromium(t)
	bin := testenv.BatonBinary(t)
	src := filepath.Join("..", "..", "examples", "react-chat")
	dir, node := testenv.NPMInstall(t, src, "BATON_EXAMPLE_NPM_DIR", "server.mjs", "src/main.jsx", "public/index.html")

	s := testenv.RunServer(t)
	cfg := filepath.Join(t.TempDir(), "baton.yaml")
	if err := os.WriteFile(cfg, []byte("profiles:\n  chat:\n    command: [\"{baton}\", fake-agent, --chat]\n    stdin: stream\n    turnEnd: {field: type, equals: result}\n    session: {pauseAfter: 1m}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &testenv.Buffer{}
	stateDir := testenv.StateDir(t)
	// The chat run waits for input past the test: its worker hands it off
	// at the end, and nobody takes it over.
	endRunsAtCleanup(t, stateDir)
	cmd := exec.Command(bin, "worker", "--nats", s.ClientURL(), "--state-dir", stateDir, "--config", cfg, "--log-format", "json")
	cmd.Stdout, cmd.Stderr = logs, logs
	w := testenv.Start(t, cmd)
	t.Cleanup(func() { w.Stop(os.Interrupt, 15*time.Second) })
	testenv.WaitFor(t, 60*time.Second, "the worker ready", func() bool { return strings.Contains(logs.String(), "worker ready") })
	_, js := testenv.Connect(t, s)
	names := protocol.MustNames("")
	con, err := console.New(t.Context(), js, names, console.WithToken("example-token"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(con)
	t.Cleanup(srv.Close)

	// `npm start`, as the README says: the bundle, then the server.
	port := testenv.FreePort(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatal("the example runs with npm: apt-get install npm")
	}
	out := &testenv.Buffer{}
	start := exec.CommandContext(ctx, npm, "start")
	start.Dir, start.Stdout, start.Stderr = dir, out, out
	start.Env = append(os.Environ(), "BATON_CONSOLE_URL="+srv.URL, "BATON_CONSOLE_TOKEN=example-token", "BATON_PROFILE=chat",
		"PORT="+fmt.Sprint(port), "PATH="+filepath.Dir(node)+":"+os.Getenv("PATH"))
	// A group of its own, stopped as a terminal's Ctrl-C stops it: npm's
	// sh and node too (SIGINT to npm alone left node serving after the test).
	start.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	app := testenv.Start(t, start)
	t.Cleanup(func() {
		_ = syscall.Kill(-start.Process.Pid, syscall.SIGINT)
		app.Stop(os.Interrupt, 10*time.Second)
		_ = syscall.Kill(-start.Process.Pid, syscall.SIGKILL) // what outlived it
		if t.Failed() {
			t.Logf("npm start:\n%s\nworker:\n%s", out.String(), logs.String())
		}
	})
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	testenv.WaitFor(t, 2*time.Minute, "the example's server to answer (npm start: esbuild, then node server.mjs)", func() bool {
		resp, err := http.Get(url + "app.js")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})

	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox)...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	type void = chromedp.Action[chromedp.Void]
	say := func(text, answer string) []void {
		return []void{
			// The answer before shows before the chat is idle again.
			chromedp.Poll[chromedp.Void](`!document.getElementById('send').disabled`, chromedp.WithPollingTimeout(30*time.Second)),
			// React reads the textarea's value from its input event.
			chromedp.Evaluate[chromedp.Void](`(() => { const t = document.getElementById('message');
				const set = Object.getOwnPropertyDescriptor(HTMLTextAreaElement.prototype, 'value').set;
				set.call(t, ` + fmt.Sprintf("%q", text) + `); t.dispatchEvent(new Event('input', { bubbles: true })); })()`),
			e2e.ClickInPage(`#send`),
			chromedp.Poll[chromedp.Void](`[...document.querySelectorAll('#messages [data-role=assistant]')].some(e => e.textContent.includes(`+fmt.Sprintf("%q", answer)+`))`,
				chromedp.WithPollingTimeout(60*time.Second)),
		}
	}
	steps := append([]void{chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(`#send`))}, say("hello", "echo: hello")...)
	if err := chromedp.Do(bctx, append(steps, say("again", "echo: again")...)...); err != nil {
		body, _ := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`body`)))
		t.Fatalf("chat in the example: %v\npage:\n%s", err, body)
	}
	thread, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`#thread`)))
	if err != nil {
		t.Fatal(err)
	}
	roles, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#messages [data-role]')].map(e => e.dataset.role)`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(roles, " ") != "user assistant user assistant" {
		t.Errorf("the page shows messages of %v, want user assistant user assistant", roles)
	}
	c, err := client.New(js, names)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.Session(t.Context(), thread)
	if err != nil || rec.RunCount != 1 || rec.Live == "" {
		t.Fatalf("session %s: %+v %v, want one live run that took both messages", thread, rec, err)
	}
}

// endRunsAtCleanup cancels, once the test's other cleanups (its workers'
// stops) are done, every run of stateDir whose runner is still alive, and
// waits (at most 15 s each) for its runner to end: a run a stopped worker
// handed off would otherwise outlive its test, its agent and runners left
// over for the rest of the suite.
func endRunsAtCleanup(t *testing.T, stateDir string) {
	t.Cleanup(func() {
		runs, _ := os.ReadDir(filepath.Join(stateDir, "runs"))
		for _, r := range runs {
			dir := journal.Dir(filepath.Join(stateDir, "runs", r.Name()))
			if alive, err := sandbox.Alive(dir); err != nil || !alive {
				continue
			}
			if err := sandbox.Cancel(dir); err != nil {
				t.Errorf("cancel the left-over run %s: %v", r.Name(), err)
				continue
			}
			testenv.WaitFor(t, 15*time.Second, "the left-over run "+r.Name()+" to end", func() bool {
				alive, err := sandbox.Alive(dir)
				return err == nil && !alive
			})
		}
	})
}
