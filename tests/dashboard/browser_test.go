package dashboard

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// EnvArtifacts names the directory the tests save their screenshots in (default a
// t.TempDir(), removed after the test; the path is logged either way).
const EnvArtifacts = "RAYGO_DASHBOARD_ARTIFACTS"

// EnvRequireChromium=1 (make test sets it) makes a missing Chromium a failure instead of
// a skip.
const EnvRequireChromium = "RAYGO_REQUIRE_CHROMIUM"

// browser is one headless Chromium with its own empty profile, driven over the
// DevTools protocol.
type browser struct {
	t         *testing.T
	ctx       context.Context
	artifacts string

	mu         sync.Mutex
	exceptions []string // uncaught JavaScript exceptions of the page
}

// startBrowser starts Chromium for the test; it is stopped at cleanup. Without a
// Chromium on PATH the test is skipped (failed with EnvRequireChromium=1).
func startBrowser(t *testing.T) *browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv(EnvRequireChromium) == "1" {
			t.Fatalf("chromium not found (scripts/ensure-tools.sh chromium installs it): %v", err)
		}
		t.Skip("chromium not installed: scripts/ensure-tools.sh chromium (make test does)")
	}
	artifacts := os.Getenv(EnvArtifacts)
	if artifacts == "" {
		artifacts = t.TempDir()
	} else {
		artifacts = filepath.Join(artifacts, t.Name())
		if err := os.MkdirAll(artifacts, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshots in %s", artifacts)
	// The background-networking flags matter: without them Chromium dials out at
	// start, and on a closed network its connections are refused.
	allocator, cancelAllocator := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	)
	ctx, cancel := chromedp.NewContext(allocator)
	t.Cleanup(func() { cancel(); cancelAllocator() })
	b := &browser{t: t, ctx: ctx, artifacts: artifacts}
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	// Uncaught exceptions of the page, from the start (Console subscribes at once).
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleException {
				b.mu.Lock()
				b.exceptions = append(b.exceptions, m.Text)
				b.mu.Unlock()
			}
		}
	}()
	return b
}

// do runs actions with a deadline.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// waitFor polls the page until the JavaScript expression is true, and fails the test
// with what after timeout. It returns how long it took.
func (b *browser) waitFor(timeout time.Duration, what, expression string) time.Duration {
	b.t.Helper()
	began := time.Now()
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expression))
		cancel()
		if err == nil && ok {
			return time.Since(began)
		}
		if time.Since(began) > timeout {
			text, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body.innerText`))
			b.t.Fatalf("%s: not within %s (last error %v); the page says:\n%s", what, timeout, err, text)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// text is the text of the first element matching the CSS selector.
func (b *browser) text(selector string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(selector)))
	if err != nil {
		b.t.Fatalf("read %s: %v", selector, err)
	}
	return text
}

// screenshot saves the whole page as name.png in the artifacts directory.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(b.artifacts, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// showPage opens one page of the dashboard through its navigation link and waits
// until it is the one shown.
func (b *browser) showPage(page string) {
	b.t.Helper()
	b.do("open "+page, chromedp.Click(chromedp.CSS(fmt.Sprintf(`nav a[data-page=%q]`, page))))
	b.waitFor(5*time.Second, page+" shown", fmt.Sprintf(`document.getElementById(%q).classList.contains("active")`, "page-"+page))
}

// noExceptions fails the test if the page threw.
func (b *browser) noExceptions() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.exceptions) > 0 {
		b.t.Errorf("the page threw: %s", strings.Join(b.exceptions, "; "))
	}
}
