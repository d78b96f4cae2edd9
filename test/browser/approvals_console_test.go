package browser

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/console"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/test/internal/e2e"
)

// TestConsoleApprovals: a run whose policy asks a person shows each
// pending approval on its page with Allow and Deny; Allow answers it
// (decided by the console, and the agent runs the tool), Deny with a
// reason gives the agent that reason, and two answers at once (as two
// people clicking) are decided once: the other is refused, and the card
// says who decided it. Decided ones say who and which rule.
// BATON_SCREENSHOTS=dir saves the page there.
func TestConsoleApprovals(t *testing.T) {
	browser := e2e.Chromium(t)
	bin := testenv.BatonBinary(t)
	s := testenv.RunServer(t)
	_, js := testenv.Connect(t, s)
	names := protocol.MustNames("")
	cfg := filepath.Join(t.TempDir(), "baton.yaml")
	if err := os.WriteFile(cfg, []byte(`profiles:
  chat:
    command: ["{baton}", fake-agent, --chat]
    stdin: stream
    timeout: 3m
    askTimeout: 2m
    policy: {default: ask, allow: ["Bash(git status*)"]}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	e2e.StartWorkerProc(t, bin, s.ClientURL(), testenv.StateDir(t), "appr", "--config", cfg)
	id := "appr-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	e2e.SubmitJob(t, js, names, map[string]any{"runId": id, "profile": "chat", "input": "approve: make test"})
	c, err := client.New(js, names)
	if err != nil {
		t.Fatal(err)
	}
	con, err := console.New(t.Context(), js, names, console.WithToken("appr-token"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(con)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	bctx := e2e.Headless(t, ctx, browser)
	// The browser starts on bctx, not on a step's context that ends.
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(bctx, 60*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			text, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`(document.getElementById('approvals') || document.body).innerText`))
			t.Fatalf("browser: %s: %v\nthe approvals card:\n%s", what, err, text)
		}
	}
	card := func(aid string) string { return `#approvals [data-approval="` + aid + `"]` }
	poll := func(js string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(100*time.Millisecond))
	}
	text := func(aid, want string) chromedp.Action[chromedp.Void] {
		return poll(`(() => { const el = document.querySelector('` + card(aid) + `'); return !!el && el.innerText.includes(` + strconv.Quote(want) + `); })()`)
	}

	step("the page shows req-1 pending with Allow and Deny",
		chromedp.Navigate(srv.URL+"/?token=appr-token#/runs/"+id),
		chromedp.WaitVisible(chromedp.CSS(card("req-1")+` button.allow`)),
		chromedp.WaitVisible(chromedp.CSS(card("req-1")+` button.deny`)),
		text("req-1", "Bash: make test"), text("req-1", "default: ask"))
	step("Allow answers req-1", e2e.ClickInPage(card("req-1")+` button.allow`),
		chromedp.WaitVisible(chromedp.CSS(card("req-1")+`[data-state="allowed"]`)), text("req-1", "allowed by console at "))
	// The fake agent drops what it reads while it waits on a prompt: the
	// next turn goes once the answer was written to it.
	answered := func(id, aid string) {
		t.Helper()
		testenv.WaitFor(t, 30*time.Second, aid+"'s answer written to the agent", func() bool {
			a, err := c.Approval(t.Context(), id, aid)
			return err == nil && a.AnswerSeq > 0
		})
	}
	answered(id, "req-1")

	if _, err := c.Send(ctx, id, []byte("approve: make deploy")); err != nil {
		t.Fatal(err)
	}
	step("Deny with a reason answers req-2",
		chromedp.WaitVisible(chromedp.CSS(card("req-2")+` button.deny`)),
		poll(`(() => { const c = document.querySelector('`+card("req-2")+`'); if (!c) return false; const i = c.querySelector('input.approval-message');
			i.value = 'not on a Friday'; i.dispatchEvent(new Event('input')); c.querySelector('button.deny').click(); return true; })()`),
		chromedp.WaitVisible(chromedp.CSS(card("req-2")+`[data-state="denied"]`)), text("req-2", "denied by console at "), text("req-2", ": not on a Friday"))
	if a, err := c.Approval(ctx, id, "req-2"); err != nil || a.Message != "not on a Friday" || a.DecidedBy != "console" {
		t.Fatalf("req-2's record: %+v, %v", a, err)
	}

	// A policy's decision shows its rule and who decided.
	answered(id, "req-2")
	if _, err := c.Send(ctx, id, []byte("approve: git status")); err != nil {
		t.Fatal(err)
	}
	step("req-3, allowed by the policy, says so", text("req-3", "allowed by policy"), text("req-3", "allow: Bash(git status*)"))

	// Two answers at once: one wins, the other is told who decided.
	answered(id, "req-3")
	if _, err := c.Send(ctx, id, []byte("approve: make release")); err != nil {
		t.Fatal(err)
	}
	step("req-4's buttons", chromedp.WaitVisible(chromedp.CSS(card("req-4")+` button.deny`)))
	step("two answers at once to req-4",
		poll(`(() => { const c = document.querySelector('`+card("req-4")+`'); if (!c) return false; c.querySelector('button.allow').click(); c.querySelector('button.deny').click(); return true; })()`),
		text("req-4", "already decided: "))
	a, err := c.Approval(ctx, id, "req-4")
	if err != nil || a.State == protocol.ApprovalPending || a.DecidedBy != "console" {
		t.Fatalf("req-4's record: %+v, %v", a, err)
	}
	step("req-4 shows its one decision", text("req-4", a.State+" by console at "),
		chromedp.WaitVisible(chromedp.CSS(card("req-4")+`[data-state="`+a.State+`"]`)))
	left, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('#approvals button').length`))
	if err != nil || left != 0 {
		t.Fatalf("buttons left on decided approvals: %d, %v", left, err)
	}
	if dir := os.Getenv("BATON_SCREENSHOTS"); dir != "" {
		e2e.Screenshot(t, bctx, filepath.Join(dir, "console-approvals.png"))
	}
	if strings.Contains(id, " ") {
		t.Fatal("unreachable")
	}
}
