package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Chromium returns the headless browser the console's tests drive, or fails
// the test saying what to install.
func Chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium on PATH: the console's browser tests need it (apt-get install chromium; test/run.sh installs it)")
	return ""
}

// Headless is a context of a headless browser (1400×900) that lives until
// ctx ends or the test does.
func Headless(t *testing.T, ctx context.Context, browser string) context.Context {
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.WindowSize(1400, 900))...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	return bctx
}

// Screenshot saves the page of ctx as a PNG at path.
func Screenshot(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

// ClickInPage clicks the element sel finds, found and clicked in one
// step inside the page, once it is there. chromedp.Click finds the node,
// then clicks it by its id in a second round trip; the runs list and the
// run's header are rebuilt as they refresh, and a node replaced in between
// fails the click ("Could not find node with given id", in CI).
func ClickInPage(sel string) chromedp.Action[chromedp.Void] {
	js := fmt.Sprintf(`(() => { const el = document.querySelector(%q); if (!el) return false; el.click(); return true; })()`, sel)
	return chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(100*time.Millisecond))
}
