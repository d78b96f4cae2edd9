package browser

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/console"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/outputs"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/test/internal/e2e"
)

// TestConsoleInBrowser opens the console in headless Chromium against a
// real worker: a run appears in the list, its transcript streams live, a
// hand-off (SIGTERM of its worker, a second worker of the node takes it)
// is marked on the timeline, and a second run is cancelled with the
// button. The run header follows the chain as a run waits for input and
// gets it; the workers page shows the nodes; a finished run's page has no
// empty card and does not scroll sideways for a long digest; the runs
// list counts the runs per state, cancels several at once, and says when
// NATS cannot be reached; a second console on another port of the host
// does not log the first out. Times show in the browser's time zone, named,
// and as durations or how long ago. A run's page says when no worker
// answers (its only worker stopped). A dead letter is retried and deleted
// from its page; a finished run shows its job's input as its first turn
// and is re-run; a Codex run (exec --json) renders from the AG-UI
// projection as a Claude one does; a run's page that NATS's outage cut off
// resumes once NATS is back, each message shown once.
// BATON_SCREENSHOTS=dir saves the list and run pages there.
func TestConsoleInBrowser(t *testing.T) {
	browser := e2e.Chromium(t)
	bin := testenv.BatonBinary(t)
	natsDir := t.TempDir() // the server restarts on it at the end
	s := testenv.RunServerIn(t, natsDir, -1)
	dir := testenv.StateDir(t)
	cfg := filepath.Join(t.TempDir(), "baton.yaml")
	if err := os.WriteFile(cfg, []byte("profiles:\n  fake:\n    command: [\"{baton}\", fake-agent]\n    allowArgs: true\n"+
		// A run that ends a turn and waits for input, twice.
		"  turns:\n    command: [\"{baton}\", fake-agent, --story, --follow-up, --rate, \"100\"]\n    stdin: stream\n    turnEnd: {field: type, equals: result}\n"+
		// A conversation that asks for permission.
		"  chat:\n    command: [\"{baton}\", fake-agent, --chat]\n    stdin: stream\n    turnEnd: {field: type, equals: result}\n"+
		// A session's turns, each run paused once it waits a second.
		"  sess:\n    command: [\"{baton}\", fake-agent, --chat]\n    stdin: stream\n    turnEnd: {field: type, equals: result}\n    session: {pauseAfter: 1s}\n"+
		// Codex exec --json: a transcript of it, from the job's files.
		"  codex:\n    command: [/bin/sh, -c, \"cat codex.ndjson\"]\n    events: codex-exec\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	startProc := func(name string) (*testenv.Proc, *testenv.Buffer) {
		logs := &testenv.Buffer{}
		cmd := exec.Command(bin, "worker", "--nats", s.ClientURL(), "--state-dir", dir, "--node", "console", "--config", cfg, "--log-format", "json", "--grace", "20s")
		cmd.Stdout, cmd.Stderr = logs, logs
		p := testenv.Start(t, cmd)
		t.Cleanup(func() {
			p.Stop(os.Interrupt, 15*time.Second)
			if t.Failed() {
				t.Logf("%s logs:\n%s", name, logs.String())
			}
		})
		return p, logs
	}
	w1, logs1 := startProc("worker 1")
	testenv.WaitFor(t, 60*time.Second, "worker 1 ready", func() bool { return strings.Contains(logs1.String(), "worker ready") })

	_, js := testenv.Connect(t, s)
	names := protocol.MustNames("")
	c, err := client.New(js, names)
	if err != nil {
		t.Fatal(err)
	}
	con, err := console.New(t.Context(), js, names, console.WithToken("browser-token"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(con)
	t.Cleanup(srv.Close)

	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	bctx := e2e.Headless(t, ctx, browser)
	// The cancel button asks for confirmation: accept it. The browser
	// starts with the first action, so open a blank page first.
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium (%s): %v", browser, err)
	}
	// Times show in the browser's zone, named: one that is not the host's.
	if _, err := chromedp.Call(bctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Kolkata"}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(bctx, emulation.SetLocaleOverride, emulation.SetLocaleOverrideParams{Locale: "en_US"}); err != nil {
		t.Fatal(err)
	}
	dialogs := chromedp.Events(bctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			// A prompt (fork's new session id) takes what it offers.
			_, _ = chromedp.Call(bctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true, PromptText: ev.DefaultPrompt})
		}
	}()
	// pageError waits for the page's error line to meet cond (of t, its
	// text).
	pageError := func(cond string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](`(t => `+cond+`)(document.querySelector('p.error').textContent)`,
			chromedp.WithPollingInterval(50*time.Millisecond))
	}
	step := func(what string, within time.Duration, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(bctx, within)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			if shot, _ := chromedp.Run(bctx, chromedp.CaptureScreenshot()); len(shot) > 0 {
				p := filepath.Join(t.TempDir(), "failure.png")
				_ = os.WriteFile(p, shot, 0o644)
				t.Logf("screenshot: %s", p)
			}
			t.Fatalf("browser: %s: %v", what, err)
		}
	}
	count := func() int {
		t.Helper()
		n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('#transcript .entry').length`))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Logged in once with ?token=, then by the cookie.
	step("open the runs list", 60*time.Second, chromedp.Navigate(srv.URL+"/?token=browser-token"), chromedp.WaitVisible(chromedp.CSS(`#runs`)))
	// A second console on another port of the host, logged into in the same
	// browser, keeps its own session beside the first's (cookies are per
	// host, not per port): the first does not ask to log in again.
	other, err := console.New(t.Context(), js, names, console.WithToken("other-token"))
	if err != nil {
		t.Fatal(err)
	}
	otherSrv := httptest.NewServer(other)
	t.Cleanup(otherSrv.Close)
	step("log into a second console on another port", 30*time.Second, chromedp.Navigate(otherSrv.URL+"/?token=other-token"), chromedp.WaitVisible(chromedp.CSS(`#runs`)))
	step("the first console still logged in", 15*time.Second, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`#runs`)))
	step("the second console still logged in", 15*time.Second, chromedp.Navigate(otherSrv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`#runs`)))
	step("back to the first console", 15*time.Second, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`#runs`)))

	submit := func(id string, args ...string) {
		t.Helper()
		if err := c.Submit(ctx, protocol.Job{RunID: id, Profile: "fake", Args: args, Labels: map[string]string{"suite": "console"}}); err != nil {
			t.Fatal(err)
		}
	}
	// Long enough to be handed off while it runs.
	submit("console-live", "--rate", "40", "--duration", "60s", "--seed", "7")
	step("the run appears in the list", 60*time.Second, chromedp.WaitVisible(chromedp.CSS(`tr[data-run="console-live"]`)))
	if dir := os.Getenv("BATON_SCREENSHOTS"); dir != "" {
		submit("console-short", "--lines", "30", "--rate", "200")
		step("the second run listed", 60*time.Second, chromedp.WaitVisible(chromedp.CSS(`tr[data-run="console-short"]`)))
		e2e.Screenshot(t, bctx, filepath.Join(dir, "console-runs.png"))
	}
	step("open the run page", 30*time.Second, e2e.ClickInPage(`tr[data-run="console-live"] a`),
		chromedp.WaitVisible(chromedp.CSS(`#transcript .entry.assistant .text`)))

	// Live: the transcript keeps growing while the run goes on.
	before := count()
	step("more entries", 30*time.Second, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.querySelectorAll('#transcript .entry').length > %d`, before),
			chromedp.WithPollingInterval(200*time.Millisecond))(ctx, tg)
		return err
	}))
	t.Logf("transcript grew live from %d to %d entries", before, count())

	// Hand-off: worker 2 of the same node starts, worker 1 is told to stop.
	w2, logs2 := startProc("worker 2")
	testenv.WaitFor(t, 60*time.Second, "worker 2 ready", func() bool { return strings.Contains(logs2.String(), "worker ready") })
	if !w1.Stop(os.Interrupt, 30*time.Second) {
		t.Fatal("worker 1 did not stop within 30s of SIGINT")
	}
	step("the hand-off on the timeline", 60*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`#timeline li[data-status="handoff"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#timeline li[data-status="attached"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#transcript .marker.handoff`)))
	timeline, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`#timeline`)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(timeline, "epoch") || !strings.Contains(timeline, "worker") {
		t.Fatalf("timeline should name workers and epochs:\n%s", timeline)
	}
	if dir := os.Getenv("BATON_SCREENSHOTS"); dir != "" {
		e2e.Screenshot(t, bctx, filepath.Join(dir, "console-run.png"))
	}

	// Cancel with the button; the run ends cancelled.
	step("cancel the run", 30*time.Second, chromedp.WaitVisible(chromedp.CSS(`#cancel`)), e2e.ClickInPage(`#cancel`))
	step("the run ends cancelled", 60*time.Second, chromedp.WaitVisible(chromedp.CSS(`#timeline li[data-status="cancelled"]`)),
		chromedp.WaitNotVisible(chromedp.CSS(`#cancel`)))
	// The page ends the run on the chain's terminal status; the worker
	// records it after publishing it: wait, bounded, for the record.
	rec, err := c.Run(ctx, "console-live")
	for deadline := time.Now().Add(10 * time.Second); (err != nil || rec.State != "cancelled") && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		rec, err = c.Run(ctx, "console-live")
	}
	if err != nil || rec.State != "cancelled" {
		t.Fatalf("record 10 s after the page showed the run cancelled: %+v %v", rec, err)
	}

	// Back in the list, live updates show the end state.
	step("the list shows it cancelled", 30*time.Second, chromedp.Navigate(srv.URL+"/#/?q=console-live"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-run="console-live"] .st-cancelled`)))
	countsText := func() string {
		t.Helper()
		got, err := chromedp.Run(bctx, chromedp.Evaluate[string](`[...document.querySelectorAll('#counts a')].map(a => a.textContent).join(' | ')`))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := countsText(); got != "all 1 | cancelled 1" {
		t.Errorf("counts per state %q, want all 1 | cancelled 1", got)
	}

	// Several runs cancelled at once: ticked in the list, one button.
	submit("console-many-1", "--rate", "5", "--duration", "60s")
	submit("console-many-2", "--rate", "5", "--duration", "60s")
	step("both runs running in the list", 60*time.Second, chromedp.Navigate(srv.URL+"/#/?q=console-many"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-run="console-many-1"] .st-running`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-run="console-many-2"] .st-running`)))
	if got := countsText(); got != "all 2 | running 2" {
		t.Errorf("counts per state %q, want all 2 | running 2", got)
	}
	step("tick both and cancel them", 30*time.Second,
		e2e.ClickInPage(`tr[data-run="console-many-1"] input[type=checkbox]`), e2e.ClickInPage(`tr[data-run="console-many-2"] input[type=checkbox]`),
		chromedp.WaitVisible(chromedp.CSS(`#cancel-selected`)), e2e.ClickInPage(`#cancel-selected`),
		chromedp.Poll[chromedp.Void](`document.getElementById('cancel-note').textContent === 'cancel requested for 2 of 2 runs'`,
			chromedp.WithPollingInterval(50*time.Millisecond)))
	step("both end cancelled", 60*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`tr[data-run="console-many-1"] .st-cancelled`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-run="console-many-2"] .st-cancelled`)),
		chromedp.WaitNotVisible(chromedp.CSS(`#cancel-selected`)))
	if got := countsText(); got != "all 2 | cancelled 2" {
		t.Errorf("counts per state %q, want all 2 | cancelled 2", got)
	}

	// 1,000 lines/s, every other one a raw line (an entry each): the
	// page keeps up, and its DOM stays bounded.
	submit("console-fast", "--rate", "1000", "--lines", "6000", "--raw-every", "2")
	step("open the fast run", 60*time.Second, chromedp.Navigate(srv.URL+"/#/runs/console-fast"),
		chromedp.WaitVisible(chromedp.CSS(`#transcript .entry.raw`)))
	step("the fast run's result shown", 60*time.Second, chromedp.WaitVisible(chromedp.CSS(`#transcript [data-result]`)),
		chromedp.WaitVisible(chromedp.CSS(`#timeline li[data-status="succeeded"]`)))
	entries := count()
	note, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`#transcript .hidden-note`)))
	if err != nil {
		t.Fatal(err)
	}
	shown, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`#count`)))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fast run: %d entries in the DOM, %q, %s", entries, note, shown)
	if entries > 1000 || !strings.Contains(note, "earlier entries not shown") {
		t.Fatalf("the transcript's DOM is not bounded: %d entries, note %q", entries, note)
	}
	// Every message of the chain went through the page: 6,001 lines and
	// the started and succeeded statuses.
	if shown != "6,003 messages" {
		t.Fatalf("the page handled %s, want 6,003", shown)
	}

	// Workers: worker 2 (from the micro service) and its node.
	step("the workers page", 30*time.Second, chromedp.Navigate(srv.URL+"/#/workers"),
		chromedp.WaitVisible(chromedp.CSS(`#workers tbody tr`)), chromedp.WaitVisible(chromedp.CSS(`#nodes tbody tr`)))
	workers, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`#workers tbody`)))
	if err != nil || !strings.Contains(workers, "console") {
		t.Fatalf("workers page: %q %v", workers, err)
	}
	// The node's row: its id, and its workers and capacity as numbers.
	node, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#nodes tbody tr:first-child td')].map(td => td.textContent)`))
	if err != nil || len(node) != 5 || node[0] != "console" || strings.Contains(strings.Join(node, "|"), "undefined") {
		t.Fatalf("nodes table row %q %v, want the node console with its numbers", node, err)
	}
	for _, n := range node[1:3] {
		if _, err := strconv.Atoi(n); err != nil {
			t.Fatalf("nodes table row %q: workers and capacity must be numbers", node)
		}
	}
	// One version, in both tables.
	if worker, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#workers tbody tr:first-child td')].map(td => td.textContent)`)); err != nil ||
		len(worker) < 3 || worker[2] != node[3] {
		t.Errorf("the workers table's row %q (%v) and the nodes table's %q name different versions", worker, err, node)
	}

	// The header follows the chain: running, waiting at the end of a
	// turn, running again once input comes (typed in the input box), and
	// the end state. An observer in the page records each header drawn.
	// The page is open before the job is submitted: it waits for the
	// run's record.
	// It says that no worker took the job only once that lasts, not in
	// the milliseconds a worker takes to take one.
	opened := time.Now()
	step("open the page of a run not submitted yet", 30*time.Second, chromedp.Navigate(srv.URL+"/#/runs/console-turns"),
		chromedp.Poll[chromedp.Void](`document.querySelector('p.error').textContent.includes('no record yet')`, chromedp.WithPollingInterval(50*time.Millisecond)))
	if said := time.Since(opened); said < 2500*time.Millisecond {
		t.Errorf("the page said the run has no record %v after it opened, want it to wait 3 s", said)
	}
	if err := c.Submit(ctx, protocol.Job{RunID: "console-turns", Profile: "turns"}); err != nil {
		t.Fatal(err)
	}
	step("the run's page once its record is there", 60*time.Second, chromedp.WaitVisible(chromedp.CSS(`.run-head .badge`)),
		chromedp.Evaluate[chromedp.Void](`window.heads = [document.querySelector('.run-head .badge').textContent];
			new MutationObserver(ms => { for (const m of ms) for (const n of m.addedNodes)
				if (n.classList && n.classList.contains('badge')) window.heads.push(n.textContent); })
				.observe(document.querySelector('.run-head'), { childList: true })`),
		chromedp.WaitVisible(chromedp.CSS(`#timeline li[data-status="started"]`)))
	typeInput := func(text string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](fmt.Sprintf(`(() => { const ta = document.getElementById('input'); if (!ta) return false;
			ta.value = %q; document.querySelector('.inputbox button').click(); return true; })()`, text),
			chromedp.WithPollingInterval(100*time.Millisecond))
	}
	waitHead := func(state string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.querySelector('.run-head .badge').textContent === %q`, state),
			chromedp.WithPollingInterval(50*time.Millisecond))
	}
	step("the first turn, then the header says waiting", 60*time.Second, typeInput("fix the upload handler"), waitHead("waiting"))
	step("the second turn ends waiting", 60*time.Second, typeInput("add a regression test"),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll('#timeline li[data-status="waiting"]').length === 2`,
			chromedp.WithPollingInterval(50*time.Millisecond)))
	if _, err := c.Send(ctx, "console-turns", nil, client.WithEOF()); err != nil {
		t.Fatal(err)
	}
	step("the header says succeeded", 60*time.Second, waitHead("succeeded"))
	drawn, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`window.heads`))
	if err != nil {
		t.Fatal(err)
	}
	chain, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#timeline li')].map(li => li.dataset.status)`))
	if err != nil {
		t.Fatal(err)
	}
	// The header names a started run running; before the first status it
	// may show the record's "starting".
	want := slices.Compact(slices.Replace(chain, 0, 1, "running"))
	drawn = slices.Compact(drawn)
	if i := slices.Index(drawn, "running"); i < 0 || !slices.Equal(drawn[i:], want) || !slices.Contains(want, "waiting") {
		t.Fatalf("the header showed %q, want it to follow the chain %q", drawn, chain)
	}
	// What was sent to the agent shows as the user's turns, the end of
	// input included (it showed as an empty line).
	sent, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#transcript .entry.user .text')].map(e => e.textContent)`))
	if err != nil || !slices.Contains(sent, "you › fix the upload handler") || !slices.Contains(sent, "you › add a regression test") ||
		!slices.Contains(sent, "you › end of input (the agent's stdin is closed)") {
		t.Errorf("the user's turns on the page: %q (%v), want the two typed and the end of input", sent, err)
	}
	// A permission prompt is one line, as is its answer; a stream-json
	// job input shows as its text.
	if err := c.Submit(ctx, protocol.Job{RunID: "console-ask", Profile: "chat",
		Input: string(client.StreamJSONUserMessage("approve: make test")) + "\n"}); err != nil {
		t.Fatal(err)
	}
	const prompt = "? Bash asks: make test  [request req-1]"
	step("the prompt on the run's page", 60*time.Second, chromedp.Navigate(srv.URL+"/#/runs/console-ask"),
		chromedp.Poll[chromedp.Void](fmt.Sprintf(`[...document.querySelectorAll('#transcript .entry.prompt')].some(e => e.textContent === %q)`, prompt),
			chromedp.WithPollingInterval(50*time.Millisecond)))
	allow := `{"type":"control_response","response":{"subtype":"success","request_id":"req-1","response":{"behavior":"allow","updatedInput":{"command":"make test"}}}}`
	if _, err := c.Send(ctx, "console-ask", []byte(allow), client.WithEOF()); err != nil {
		t.Fatal(err)
	}
	step("the answer on the run's page, and the run's end", 60*time.Second, chromedp.WaitVisible(chromedp.CSS(`#timeline li[data-status="succeeded"]`)))
	if sent, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#transcript .entry.user .text')].map(e => e.textContent)`)); err != nil ||
		!slices.Equal(sent, []string{"you › approve: make test", "you › allow req-1", "you › end of input (the agent's stdin is closed)"}) {
		t.Errorf("the user's turns of the conversation: %q (%v)", sent, err)
	}

	// Dead letters: a job for a profile no worker has.
	if err := c.Submit(ctx, protocol.Job{RunID: "console-bad", Profile: "no-such-profile"}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 30*time.Second, "the bad job in the DLQ", func() bool {
		d, err := c.DLQ(ctx, 10)
		return err == nil && len(d) > 0
	})
	step("the dead letters page", 30*time.Second, chromedp.Navigate(srv.URL+"/#/dlq"), chromedp.WaitVisible(chromedp.CSS(`#dlq tbody tr`)))
	dlq, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`#dlq tbody`)))
	if err != nil || !strings.Contains(dlq, "no-such-profile") {
		t.Fatalf("dead letters page: %q %v", dlq, err)
	}
	// Retried from its row: submitted again under its own id (and, the
	// profile still missing, rejected again); then deleted, which the
	// test server's user may.
	dead, err := c.DLQ(ctx, 10)
	if err != nil || len(dead) != 1 {
		t.Fatalf("the DLQ: %+v %v, want the bad job", dead, err)
	}
	row := fmt.Sprintf(`#dlq tr[data-seq="%d"]`, dead[0].Seq)
	step("retry the dead letter", 30*time.Second, e2e.ClickInPage(row+` button.retry`),
		chromedp.Poll[chromedp.Void](`document.querySelector('`+row+` .note').textContent === 'submitted again as run console-bad'`,
			chromedp.WithPollingInterval(50*time.Millisecond)))
	testenv.WaitFor(t, 30*time.Second, "the retried job rejected again", func() bool {
		d, err := c.DLQ(ctx, 10)
		return err == nil && len(d) == 2
	})
	// The run's page says why it has no record, where it waited for one.
	step("the rejected run's page says why", 30*time.Second, chromedp.Navigate(srv.URL+"/#/runs/console-bad"),
		pageError(`t.startsWith('run console-bad was rejected (unknown_profile)')`), chromedp.Navigate(srv.URL+"/#/dlq"),
		chromedp.WaitVisible(chromedp.CSS(row)))
	step("delete the dead letter", 30*time.Second, e2e.ClickInPage(row+` button.delete`), chromedp.WaitNotPresent(chromedp.CSS(row)))
	d, err := c.DLQ(ctx, 10)
	if err != nil || len(d) != 1 || d[0].Seq == dead[0].Seq {
		t.Fatalf("the DLQ after the delete: %+v %v, want the retry's entry only", d, err)
	}
	// The last one deleted, the page says there is none.
	if err := c.DeleteDLQ(ctx, d[0].Seq); err != nil {
		t.Fatal(err)
	}
	step("the empty dead letters page says so", 30*time.Second, chromedp.Navigate(srv.URL+"/#/"), chromedp.Navigate(srv.URL+"/#/dlq"),
		chromedp.WaitVisible(chromedp.CSS(`#dlq-empty`)))

	// A finished run's page: a tool call with its result, the result
	// line, a raw line, the stderr tail, and an output to download. Its
	// chain is written here as a worker would.
	runs, err := kv.Open[kv.RunRecord](ctx, js, names.RunsBucket())
	if err != nil {
		t.Fatal(err)
	}
	// It had retries, so its record keeps its job (to re-run), and the
	// start of its input.
	keptJob, err := protocol.EncodeWorkerJob(protocol.Job{RunID: "console-done", Profile: "fake", Retries: 1, Args: []string{"--lines", "3"}, Input: "list the files"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runs.Create(ctx, "console-done", kv.RunRecord{RunID: "console-done", State: "failed", Profile: "fake", Node: "console", CreatedAt: time.Now(),
		Retries: 1, Job: keptJob, Input: "list the files"}); err != nil {
		t.Fatal(err)
	}
	obs, err := js.ObjectStore(ctx, names.OutputsBucket()) // the workers provisioned it
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutString(ctx, "console-done/diff.patch", "--- a\n+++ b\n"); err != nil {
		t.Fatal(err)
	}
	// Long words: the digest as the object store writes it, and a file
	// named by a digest (a cache entry), as the outputs list shows them.
	sum := sha256.Sum256([]byte("--- a\n+++ b\n"))
	digest := "SHA-256=" + base64.URLEncoding.EncodeToString(sum[:])
	cached := ".cache/sha256/" + hex.EncodeToString(sum[:])
	for _, m := range []struct {
		kind protocol.RunKind
		data string
	}{
		{protocol.KindStatus, `{"status":"started","runId":"console-done","worker":"w","epoch":1,"offset":0,"time":"2026-12-01T05:00:00Z"}`},
		{protocol.KindEvents, `{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"Listing."},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls -la"}}]}}`},
		{protocol.KindEvents, `{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"file-one.txt"}]}}`},
		{protocol.KindRaw, `plain <b>not html</b>`},
		{protocol.KindEvents, `{"type":"result","subtype":"error_during_execution","is_error":true,"num_turns":3,"total_cost_usd":0.0123,"duration_ms":4200}`},
		{protocol.KindStatus, `{"status":"failed","runId":"console-done","worker":"w","epoch":1,"offset":9,"exitCode":3,"stderrTail":"boom: exit 3\n","time":"2026-12-01T05:00:05Z","outputs":[{"name":"diff.patch","size":12,"digest":"` + digest + `"},{"name":"` + outputs.FileName("console-done", cached) + `","path":"` + cached + `","size":12,"digest":"` + digest + `"}]}`},
	} {
		if _, err := js.Publish(ctx, names.IngestSubject("console-done", m.kind), []byte(m.data)); err != nil {
			t.Fatal(err)
		}
	}
	step("the finished run's page", 30*time.Second, chromedp.Navigate(srv.URL+"/#/runs/console-done"),
		chromedp.WaitVisible(chromedp.CSS(`.stderr pre`)), chromedp.WaitVisible(chromedp.CSS(`#outputs a`)),
		chromedp.WaitVisible(chromedp.CSS(`#transcript [data-result]`)))
	for sel, want := range map[string]string{
		`.stderr pre`:                      "boom: exit 3",
		`#transcript .tool summary`:        "Bash ls -la",
		`#transcript [data-result]`:        "3 turns · $0.0123",
		`#transcript .entry.raw`:           "plain <b>not html</b>",
		`#timeline li[data-status=failed]`: "exit 3",
		// 05:00:05 UTC in Kolkata, and 5 s after the started status.
		`.run-head dd[data-field=finished]`: "10:30:05 GMT+5:30",
		`.run-head dd[data-field=duration]`: "5 s",
	} {
		got, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil || !strings.Contains(got, want) {
			t.Errorf("%s: %q (%v), want %q", sel, got, err, want)
		}
	}
	// The job's input is the run's first turn (the projection's first
	// user message), before the agent's first line.
	if first, err := chromedp.Run(bctx, chromedp.Evaluate[string](`(e => e.id + ' ' + e.textContent)(document.querySelector('#transcript .entry'))`)); err != nil || first != "job-input you › list the files" {
		t.Errorf("the transcript's first entry %q (%v), want the job's input", first, err)
	}
	result, err := chromedp.Run(bctx, chromedp.TextContent(chromedp.CSS(`#transcript .tool .result`)))
	if err != nil || result != "file-one.txt" {
		t.Errorf("tool result %q %v", result, err)
	}
	patch, err := chromedp.Run(bctx, chromedp.Evaluate[string](`fetch(document.querySelector('#outputs a').href).then(r => r.text())`, chromedp.EvalAwaitPromise))
	if err != nil || patch != "--- a\n+++ b\n" {
		t.Errorf("output download: %q %v", patch, err)
	}
	if n, _ := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('#transcript b').length`)); n != 0 {
		t.Error("a raw line was rendered as HTML")
	}
	if hidden, _ := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.getElementById('cancel').hidden`)); !hidden {
		t.Error("the cancel button shows on a finished run")
	}
	// Nothing to cancel and no tokens to hand out: no card shows empty.
	if n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`[...document.querySelectorAll('.card')]
		.filter(c => c.offsetParent !== null && c.innerText.trim() === '').length`)); err != nil || n != 0 {
		t.Errorf("%d empty cards on the finished run's page (%v)", n, err)
	}
	// The digest wraps in its column: the page does not scroll sideways.
	if got, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`#outputs ul`))); err != nil || !strings.Contains(got, digest) || !strings.Contains(got, cached) {
		t.Errorf("outputs %q (%v), want the digest %s and the file %s", got, err, digest, cached)
	}
	if w, err := chromedp.Run(bctx, chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, document.documentElement.clientWidth]`)); err != nil || w[0] > w[1] {
		t.Errorf("the finished run's page is %v wide (scroll, viewport) (%v): something does not wrap", w, err)
	}
	if dir := os.Getenv("BATON_SCREENSHOTS"); dir != "" {
		e2e.Screenshot(t, bctx, filepath.Join(dir, "console-run-done.png"))
	}
	// Re-run: the same job, a new run, linked from the page.
	step("re-run the finished run", 30*time.Second, e2e.ClickInPage(`#rerun-button`), chromedp.WaitVisible(chromedp.CSS(`#rerun-note a`)))
	rerun, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`#rerun-note a`)))
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 60*time.Second, "the re-run "+rerun+" to succeed", func() bool {
		rec, err := c.Run(ctx, rerun)
		return err == nil && rec.State == "succeeded" && rec.Input == "list the files"
	})

	// A Codex run (exec --json) renders as a Claude one does, from its
	// AG-UI projection: the agent's lines are those of agui's fixture, in
	// the job's workspace, printed by the profile's command.
	var codexLines []string
	fixture, err := os.ReadFile(filepath.Join("..", "..", "agui", "testdata", "codex-exec.chain.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(fixture)) {
		var m struct{ Kind, Data string }
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		if m.Kind == "events" {
			codexLines = append(codexLines, m.Data+"\n")
		}
	}
	if err := c.Submit(ctx, protocol.Job{RunID: "console-codex", Profile: "codex", Input: "write proof.txt",
		Files: map[string]string{"codex.ndjson": strings.Join(codexLines, "")}}); err != nil {
		t.Fatal(err)
	}
	step("the Codex run's page", 60*time.Second, chromedp.Navigate(srv.URL+"/#/runs/console-codex"),
		chromedp.WaitVisible(chromedp.CSS(`#timeline li[data-status="succeeded"]`)), chromedp.WaitVisible(chromedp.CSS(`#transcript .marker.succeeded`)))
	for sel, want := range map[string]string{
		`#job-input`:                         "you › write proof.txt",
		`#transcript .entry.assistant .text`: "Done: proof.txt is written.",
		`#transcript .tool summary`:          "shell /bin/bash -lc 'echo written by codex > proof.txt && cat proof.txt'",
		`#transcript .thinking pre`:          "One shell command writes proof.txt.",
		`#transcript [data-result]`:          "20 in (8 cached), 10 out (4 reasoning) tokens",
	} {
		got, err := chromedp.Run(bctx, chromedp.Evaluate[string](fmt.Sprintf(`(e => e ? e.textContent : '(none)')(document.querySelector(%q))`, sel)))
		if err != nil || !strings.Contains(got, want) {
			t.Errorf("Codex run: %s: %q (%v), want %q", sel, got, err, want)
		}
	}
	if result, err := chromedp.Run(bctx, chromedp.Evaluate[string](`(e => e ? e.textContent : '(none)')(document.querySelector('#transcript .tool .result'))`)); err != nil || result != "written by codex\n" {
		t.Errorf("Codex run: the command's result %q (%v), want its output", result, err)
	}
	// No item line shows as raw JSON.
	if items, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#transcript .entry.json summary')]
		.map(e => e.textContent).filter(t => t.startsWith('item.'))`)); err != nil || len(items) != 0 {
		t.Errorf("Codex run: items shown as JSON: %q (%v)", items, err)
	}

	// A session: listed, its page lists its run and checkpoint; the send
	// box starts its next run, which the page then lists; a run's page
	// links its session; fork makes a new session from a checkpoint.
	if err := c.Submit(ctx, protocol.Job{RunID: "console-s-1", Profile: "sess", Input: "first turn"}, client.WithSession("console-s")); err != nil {
		t.Fatal(err)
	}
	step("the paused session listed", 60*time.Second, chromedp.Navigate(srv.URL+"/#/sessions"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-session="console-s"] .st-paused`)))
	step("the session's page", 30*time.Second, e2e.ClickInPage(`tr[data-session="console-s"] a`),
		chromedp.WaitVisible(chromedp.CSS(`#session-runs tr[data-run="console-s-1"] .st-paused`)),
		chromedp.WaitVisible(chromedp.CSS(`#checkpoints tr[data-checkpoint="1"]`)))
	step("send starts the session's next run", 60*time.Second, chromedp.SendKeys(chromedp.CSS(`#session-input`), "second turn"),
		e2e.ClickInPage(`#session-send`), chromedp.WaitVisible(chromedp.CSS(`#session-note a`)))
	second, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`#session-note a`)))
	if err != nil {
		t.Fatal(err)
	}
	step("the page lists the second run, paused, and its checkpoint", 60*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`#session-runs tr[data-run="`+second+`"] .st-paused`)),
		chromedp.WaitVisible(chromedp.CSS(`#checkpoints tr[data-checkpoint="2"]`)))
	step("the session's transcript holds both runs in order", 30*time.Second, chromedp.Poll[chromedp.Void](
		`(t => t.indexOf('echo: first turn') >= 0 && t.indexOf('echo: first turn') < t.indexOf('you › second turn') &&
			t.indexOf('you › second turn') < t.indexOf('echo: second turn'))(document.getElementById('session-transcript').innerText)`,
		chromedp.WithPollingInterval(100*time.Millisecond)))
	if n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('#session-transcript .marker.run-start').length`)); err != nil || n != 2 {
		t.Errorf("the session's transcript has %d run headers (%v), want 2", n, err)
	}
	if rec, err := c.Run(ctx, second); err != nil || rec.Input != "second turn" || rec.Session != "console-s" {
		t.Errorf("the run the page's send started: %+v (%v)", rec, err)
	}
	step("a session's run links its session", 30*time.Second, e2e.ClickInPage(`#session-runs tr[data-run="`+second+`"] a`),
		chromedp.WaitVisible(chromedp.CSS(`.run-head dd[data-field=session] a`)), chromedp.WaitVisible(chromedp.CSS(`#transcript .entry.assistant`)))
	if got, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`#transcript`))); err != nil || !strings.Contains(got, "echo: second turn") {
		t.Errorf("the second run's transcript %q (%v), want the agent's answer to the sent message", got, err)
	}
	step("back to the session, fork its first checkpoint", 30*time.Second, e2e.ClickInPage(`.run-head dd[data-field=session] a`),
		e2e.ClickInPage(`#checkpoints tr[data-checkpoint="1"] button.fork`), chromedp.WaitVisible(chromedp.CSS(`#checkpoints tr[data-checkpoint="1"] .note a`)))
	if f, err := c.Session(ctx, "console-s-1"); err != nil || f.ForkedFrom == nil || f.ForkedFrom.Session != "console-s" || f.ForkedFrom.Checkpoint != 1 {
		t.Errorf("the fork the page made: %+v (%v)", f, err)
	}

	// Its only worker stops under a run's page, which says, once it lasts,
	// that no worker answers, and stops saying it once one does again.
	submit("console-alone", "--rate", "20", "--duration", "60s")
	step("open the run whose worker stops", 60*time.Second, chromedp.Navigate(srv.URL+"/#/runs/console-alone"),
		chromedp.WaitVisible(chromedp.CSS(`#timeline li[data-status="started"]`)))
	if !w2.Stop(os.Interrupt, 30*time.Second) {
		t.Fatal("worker 2 did not stop within 30s of SIGINT")
	}
	noWorker := func(cond string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](`(t => `+cond+`)(document.getElementById('no-worker').textContent)`,
			chromedp.WithPollingInterval(50*time.Millisecond))
	}
	step("the page says no worker answers", 30*time.Second, noWorker(`t.startsWith('No worker answers')`))
	_, logs3 := startProc("worker 3")
	testenv.WaitFor(t, 60*time.Second, "worker 3 ready", func() bool { return strings.Contains(logs3.String(), "worker ready") })
	step("the page says so no more once a worker answers", 30*time.Second, noWorker(`t === ''`),
		chromedp.WaitVisible(chromedp.CSS(`#timeline li[data-status="attached"]`)))
	// Cancelled, and waited for: a run left running outlives the test.
	step("cancel the run whose worker stopped", 60*time.Second, e2e.ClickInPage(`#cancel`),
		chromedp.WaitVisible(chromedp.CSS(`#timeline li[data-status="cancelled"]`)))

	// NATS goes away under a run's page, which says so, and comes back:
	// the page resumes its stream after the last message it showed, so
	// once the run ends it has shown each message of its chain once.
	submit("console-outage", "--lines", "150", "--rate", "10")
	step("open the run the outage interrupts", 60*time.Second, chromedp.Navigate(srv.URL+"/#/runs/console-outage"),
		chromedp.WaitVisible(chromedp.CSS(`#timeline li[data-status="started"]`)), chromedp.WaitVisible(chromedp.CSS(`#transcript .entry`)))
	port := s.Addr().(*net.TCPAddr).Port
	s.Shutdown()
	s.WaitForShutdown()
	step("the run's page says NATS cannot be reached", 30*time.Second, pageError(`t.startsWith('stream: NATS cannot be reached')`))
	s = testenv.RunServerIn(t, natsDir, port)
	step("the run's page resumes once NATS is back", 60*time.Second, pageError(`t === ''`),
		chromedp.WaitVisible(chromedp.CSS(`#timeline li[data-status="succeeded"]`)))
	var chained int
	if _, err := c.Watch(ctx, "console-outage", func(client.Event) error { chained++; return nil }); err != nil {
		t.Fatal(err)
	}
	step("the page shows each message of the chain once", 10*time.Second,
		chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.getElementById('count').textContent === '%s messages'`, commas(chained)),
			chromedp.WithPollingInterval(50*time.Millisecond)))
	// Its transcript resumed after the last AG-UI event it showed: it is
	// the one a page opened now draws, no event twice, none missed.
	transcriptText := func() string {
		t.Helper()
		got, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById('transcript').textContent`))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	step("the resumed transcript's end", 30*time.Second, chromedp.WaitVisible(chromedp.CSS(`#transcript .marker.succeeded`)))
	resumed := transcriptText()
	step("the run's page opened again", 60*time.Second, chromedp.Navigate(srv.URL+"/#/"), chromedp.WaitVisible(chromedp.CSS(`#runs`)),
		chromedp.Navigate(srv.URL+"/#/runs/console-outage"), chromedp.WaitVisible(chromedp.CSS(`#transcript .marker.succeeded`)))
	if fresh := transcriptText(); fresh != resumed {
		t.Errorf("the transcript resumed after the outage differs from a fresh one:\nresumed: %q\nfresh:   %q", resumed, fresh)
	}

	// NATS goes away under the list page, which says so, and comes back.
	step("the runs list", 30*time.Second, chromedp.Navigate(srv.URL+"/#/"), chromedp.WaitVisible(chromedp.CSS(`tr[data-run="console-done"]`)))
	created, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`(el => [el.textContent, el.title])(document.querySelector('tr[data-run="console-done"] [data-ago]'))`))
	if err != nil || len(created) != 2 || !strings.HasSuffix(created[0], " ago") || !strings.HasSuffix(created[1], "GMT+5:30") {
		t.Errorf("the list's created time %q (%v), want how long ago, and the time in its zone", created, err)
	}
	s.Shutdown()
	s.WaitForShutdown()
	step("the list says NATS cannot be reached", 30*time.Second, pageError(`t.startsWith('NATS cannot be reached')`))
	testenv.RunServerIn(t, natsDir, port)
	step("the list's error gone once NATS is back", 30*time.Second, pageError(`t === ''`))
}

// commas writes n as the page counts, in en_US: 1,234.
func commas(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
