package escape

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/batonhq/baton/console"
	"github.com/batonhq/baton/test/internal/e2e"
)

// TestConsoleShowsEgress: a run's page in the console shows each
// connection its agent made through the egress proxy in a line of its
// own: the allowed GET and tunnel with their bytes, the refused CONNECT
// and DNS query with why. BATON_SCREENSHOTS=dir saves the page there.
func TestConsoleShowsEgress(t *testing.T) {
	browser := e2e.Chromium(t)
	w := newEgressWorld(t)
	w.worker()
	id := w.submit(1, 0)
	con, err := console.New(t.Context(), w.js, w.names, console.WithToken("egress-token"))
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
	// The run ends with its egress, all three shown.
	err = chromedp.Do(sctx, chromedp.Navigate(srv.URL+"/?token=egress-token#/runs/"+id),
		chromedp.WaitVisible(chromedp.CSS(`#timeline li[data-status="succeeded"]`)),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll('#transcript .entry.egress').length >= 4`, chromedp.WithPollingInterval(100*time.Millisecond)))
	if err != nil {
		t.Fatalf("browser: waited up to 90 s for run %s's page to show it succeeded with 4 egress lines: %v", id, err)
	}
	lines, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#transcript .entry.egress')].map(e => e.className + ' | ' + e.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		fmt.Sprintf("entry egress mono | egress ✓ GET %s:%d ↑ ", egressName, w.host.Port),
		"entry egress mono refused | egress ✗ CONNECT example.com:443 refused: \"example.com\": not on the allowlist",
		fmt.Sprintf("entry egress mono | egress ✓ CONNECT %s:%d ↑ ", w.host.Addr, w.host.Port),
		"entry egress mono refused | egress ✗ DNS exfil.example:53 refused: not on the allowlist",
	}
	// A connection shows when it ends: the tunnel may end after the
	// query that followed it began, so the order is not checked here
	// (TestEgressOnTheChain checks it against the journal).
	if len(lines) != len(want) {
		t.Fatalf("egress lines:\n%s\nwant %d", strings.Join(lines, "\n"), len(want))
	}
	for _, w := range want {
		n := 0
		for _, l := range lines {
			if strings.HasPrefix(l, w) && strings.Contains(w, "✓") == strings.Contains(l, " B in ") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d egress lines start %q (and give bytes and a duration if allowed), want 1:\n%s", n, w, strings.Join(lines, "\n"))
		}
	}
	if dir := os.Getenv("BATON_SCREENSHOTS"); dir != "" {
		e2e.Screenshot(t, bctx, filepath.Join(dir, "console-egress.png"))
	}
}
