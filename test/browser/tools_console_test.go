package browser

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/batonhq/baton/console"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/test/internal/e2e"
)

// TestConsoleShowsTools: a run's page in the console shows each host tool
// call and its answer in a line of its own: the tool, the call's number
// and its arguments, then its result or, in red, its error. What the agent
// and the service wrote shows as text on one line: markup is not markup,
// control and bidirectional characters are escaped. A call the runner
// refused (an unlisted tool) is not shown: it is not on the chain.
// BATON_SCREENSHOTS=dir saves the page there.
func TestConsoleShowsTools(t *testing.T) {
	browser := e2e.Chromium(t)
	bin := testenv.BatonBinary(t)
	s := testenv.RunServer(t)
	nc, js := testenv.Connect(t, s)
	names := protocol.MustNames("")
	testenv.NewToolService(t, nc, names, nil)
	cfg := filepath.Join(t.TempDir(), "baton.yaml")
	// The agent is `baton mcp` itself: its stdin, the job's input, is what
	// an MCP client would write.
	if err := os.WriteFile(cfg, []byte("profiles:\n  tools:\n    command: [\"{baton}\", mcp]\n    timeout: 2m\n    tools: [deploy, create_pr]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e2e.StartWorkerProc(t, bin, s.ClientURL(), testenv.StateDir(t), "tools", "--config", cfg)
	id := "tools-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	call := func(n int, name, args string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, n, name, args)
	}
	// `baton mcp` may make the two calls at once: which is #1 is not
	// checked.
	e2e.SubmitJob(t, js, names, map[string]any{"runId": id, "profile": "tools", "input": strings.Join([]string{
		call(1, "deploy", "{\"env\":\"<b>prod</b>\u202eevil\\nnext\"}"),
		call(2, "create_pr", `{"title":"x"}`),
		call(3, "rm_rf", `{}`),
	}, "\n") + "\n"})

	con, err := console.New(t.Context(), js, names, console.WithToken("tools-token"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(con)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	bctx := e2e.Headless(t, ctx, browser)
	sctx, cancelStep := context.WithTimeout(bctx, 90*time.Second)
	defer cancelStep()
	err = chromedp.Do(sctx, chromedp.Navigate(srv.URL+"/?token=tools-token#/runs/"+id),
		chromedp.WaitVisible(chromedp.CSS(`#timeline li[data-status="succeeded"]`)),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll('#transcript .entry.host-tool').length >= 4`, chromedp.WithPollingInterval(100*time.Millisecond)))
	if err != nil {
		t.Fatalf("browser: waited up to 90 s for run %s's page to show it succeeded with 4 tool lines: %v", id, err)
	}
	lines, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#transcript .entry.host-tool')].map(e => e.className + ' | ' + e.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	markup, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('#transcript .entry.host-tool *').length`))
	if err != nil {
		t.Fatal(err)
	}
	if markup != 0 {
		t.Errorf("the tool lines hold %d elements: what the agent wrote became markup", markup)
	}
	// Each line once; the calls' numbers are the order the runner took
	// them in, which the two calls in flight at once do not fix.
	want := []*regexp.Regexp{
		regexp.MustCompile(`^entry host-tool mono \| tool › deploy #\d \{"env":"<b>prod</b>\\u202eevil\\nnext"\}$`),
		regexp.MustCompile(`^entry host-tool mono \| tool › deploy #\d → deployed \{"env":".*\\u202eevil\\nnext"\} for ` + id + `$`),
		regexp.MustCompile(`^entry host-tool mono \| tool › create_pr #\d \{"title":"x"\}$`),
		regexp.MustCompile(`^entry host-tool mono err \| tool › create_pr #\d ✗ tool create_pr failed \(409\): a pull request for this branch exists$`),
	}
	if len(lines) != len(want) {
		t.Fatalf("tool lines:\n%s\nwant %d", strings.Join(lines, "\n"), len(want))
	}
	for _, re := range want {
		n := 0
		for _, l := range lines {
			if re.MatchString(l) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d tool lines match %s, want 1:\n%s", n, re, strings.Join(lines, "\n"))
		}
	}
	if dir := os.Getenv("BATON_SCREENSHOTS"); dir != "" {
		e2e.Screenshot(t, bctx, filepath.Join(dir, "console-tools.png"))
	}
}
