package browser

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton/console"
	"github.com/batonhq/baton/internal/provision"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/test/internal/e2e"
	"github.com/batonhq/baton/worker"
)

// TestConsoleQueue: the runs list shows the Queue card: each concurrency
// key's running jobs against its limit, weight and waiting count, then
// its first waiting jobs with their position and why they wait, in
// words; the card follows the queue (read every 5 s) and hides once no
// key has a job waiting or running. testenv's stand-in answers the queue
// request IN PLACE OF THE WORKERS' ENDPOINT, which package worker tests.
// BATON_SCREENSHOTS=dir saves the page there.
func TestConsoleQueue(t *testing.T) {
	browser := e2e.Chromium(t)
	s := testenv.RunServer(t)
	nc, js := testenv.Connect(t, s)
	names := protocol.MustNames("")
	if _, err := provision.Ensure(t.Context(), js, names, provision.Options{}); err != nil {
		t.Fatal(err)
	}
	stopRelay, err := worker.ServeReadRelay(t.Context(), nc, names, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stopRelay() })
	standIn := testenv.StandInForWorkersQueue(t, nc, names, testenv.SampleQueue(time.Now()))
	con, err := console.New(t.Context(), js, names, console.WithToken("queue-token"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(con)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	bctx := e2e.Headless(t, ctx, browser)
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			text, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`(document.getElementById('queue') || document.body).innerText`))
			t.Fatalf("browser: %s: %v\nthe queue card:\n%s", what, err, text)
		}
	}
	poll := func(js string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(100*time.Millisecond))
	}
	row := func(sel, want string) chromedp.Action[chromedp.Void] {
		return poll(`(() => { const el = document.querySelector(` + strconv.Quote(sel) + `); return !!el && el.innerText.replace(/\s+/g, ' ').trim() === ` + strconv.Quote(want) + `; })()`)
	}
	rowStarts := func(sel, want string) chromedp.Action[chromedp.Void] {
		return poll(`(() => { const el = document.querySelector(` + strconv.Quote(sel) + `); return !!el && el.innerText.replace(/\s+/g, ' ').trim().startsWith(` + strconv.Quote(want) + `); })()`)
	}
	step("the runs list shows the queue's keys",
		chromedp.Navigate(srv.URL+"/?token=queue-token#/"),
		chromedp.WaitVisible(chromedp.CSS(`#queue`)),
		poll(`document.querySelector('#queue h2').innerText.includes('3 workers, 1 free slot')`),
		row(`#queue-keys [data-key="acme"]`, "acme 2/2 3 4"),
		row(`#queue-keys [data-key="globex"]`, "globex 0 (no limit) 1 1"),
		row(`#queue-keys [data-key="initech"]`, "initech 1/4 1 0"),
		// The runs list of a deployment with no run yet says no error
		// (its filters' lists came as null: "values is not iterable").
		poll(`[...document.querySelectorAll('main p.error')].every(p => p.innerText === '')`))
	step("and its waiting jobs, with why they wait",
		rowStarts(`#queue-jobs [data-run="run-acme-7"]`, "acme 1 run-acme-7 claude 5 3 min"),
		poll(`document.querySelector('#queue-jobs [data-run="run-acme-7"]').innerText.endsWith('key at its limit')`),
		poll(`document.querySelector('#queue-jobs [data-run="run-acme-6"]').innerText.endsWith("behind its key's earlier jobs")`),
		poll(`document.querySelector('#queue-jobs [data-run="run-globex-1"]').innerText.endsWith('profile at its limit on every free worker')`),
		poll(`document.querySelector('#queue-jobs [data-run="run-umbrella-1"]').innerText.endsWith('no free worker')`),
		poll(`document.querySelector('#queue-jobs [data-run="run-acme-7"] a').getAttribute('href') === '#/runs/run-acme-7'`),
		poll(`document.getElementById('queue').innerText.includes('acme: 1 more waiting, not listed')`))
	if dir := os.Getenv("BATON_SCREENSHOTS"); dir != "" {
		e2e.Screenshot(t, bctx, filepath.Join(dir, "console-queue.png"))
	}
	// The queue moves on: the card follows it, then hides when it empties.
	next := testenv.SampleQueue(time.Now())
	next.Keys = next.Keys[1:2]
	standIn.Set(next)
	step("the card follows the queue",
		poll(`!document.querySelector('#queue-keys [data-key="acme"]')`),
		row(`#queue-keys [data-key="globex"]`, "globex 0 (no limit) 1 1"))
	standIn.Set(protocol.QueueView{Workers: 3, FreeSlots: 4})
	step("and hides once nothing waits or runs", chromedp.WaitNotVisible(chromedp.CSS(`#queue`)))
	// No worker answering the request (workers without concurrency keys):
	// no card, no error.
	standIn.Set(testenv.SampleQueue(time.Now()))
	step("shown again", chromedp.WaitVisible(chromedp.CSS(`#queue`)))
	standIn.Stop()
	step("hidden while no worker answers", chromedp.WaitNotVisible(chromedp.CSS(`#queue`)),
		poll(`document.querySelector('#queue .error').innerText === ''`))
}
