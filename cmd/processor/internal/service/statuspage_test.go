package service_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/cmd/processor/internal/metrics"
	"github.com/detourhq/detour/cmd/processor/internal/operator"
	"github.com/detourhq/detour/cmd/processor/internal/service"
)

// TestStatusPage loads / in headless Chromium while a provider fails: the
// rendered page shows it open with a plausible time left, and, once its
// cooldown ended and the redelivered request's probe succeeded, closed,
// without a reload. Screenshots of both go to the test's artifact
// directory (go test -artifacts keeps them).
func TestStatusPage(t *testing.T) {
	browser := findChromium()
	if browser == "" {
		t.Skip("no Chromium found (chromium, chromium-browser, google-chrome or headless-shell on PATH, or $DETOUR_CHROMIUM): .ci/run installs Debian's chromium")
	}
	flaky := providertest.New(providertest.OpenAI, providertest.OK())
	defer flaky.Close()
	const cooldown = 5
	h := newHarness(t)
	file := parseChainFile(t, fmt.Sprintf(`
providers:
  - name: flaky
    type: openai
    base_url: %s
    model: flaky-model
    max_retries: 0
    failure_threshold: 1
    cooldown: %ds
chains:
  default: [flaky]
`, flaky.URL, cooldown))
	p := h.assemble(file, testSettings(), false, withMetrics(metrics.New()))
	p.run()
	web := httptestServer(t, p.Processor)

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(420, 900))...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	defer cancelTimeout()

	const row = `tr[data-provider="flaky"]`
	if err := chromedp.Do(ctx, chromedp.Navigate(web), chromedp.WaitVisible(row+`[data-state="closed"]`)); err != nil {
		t.Fatalf("the page shows no closed row for flaky: %v", err)
	}

	flaky.SetScript(providertest.Status(500))
	h.publish("default", request("page-1", "hello"))
	if err := chromedp.Do(ctx, chromedp.WaitVisible(row+`[data-state="open"]`)); err != nil {
		t.Fatalf("the page never showed flaky open: %v", err)
	}
	state := text(t, ctx, row+" td.state")
	failures := text(t, ctx, row+" td.failures")
	attr, err := chromedp.Run(ctx, chromedp.AttributeValue(row+" td.left", "data-seconds"))
	if err != nil {
		t.Fatal(err)
	}
	left := attr.Value
	secs, _ := strconv.ParseFloat(left, 64)
	if state != "open" || secs <= 0 || secs > cooldown || failures != "1" {
		t.Errorf("open row: state %q, %ss left, %s failures; want open, 0 < left <= %d, 1", state, left, failures, cooldown)
	}
	screenshot(t, ctx, "statuspage-open.png")

	// The request comes back when the cooldown ends and probes flaky.
	flaky.SetScript(providertest.OK())
	if err := chromedp.Do(ctx, chromedp.WaitVisible(row+`[data-state="closed"]`)); err != nil {
		t.Fatalf("the page never showed flaky closed again: %v", err)
	}
	if state := text(t, ctx, row+" td.state"); state != "closed" {
		t.Errorf("after recovery: state %q, want closed", state)
	}
	if res, _ := h.waitResult("page-1", 5*time.Second); res.Provider != "flaky" {
		t.Errorf("page-1 answered by %q, want flaky", res.Provider)
	}
	events, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#events li[data-event]").length`))
	if err != nil {
		t.Fatal(err)
	}
	if events < 2 {
		t.Errorf("the page lists %d outage events, want opened and more", events)
	}
	screenshot(t, ctx, "statuspage-closed.png")
}

// text reads the rendered text of the element sel selects.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(sel))
	if err != nil {
		t.Fatalf("reading %s: %v", sel, err)
	}
	return s
}

// findChromium returns the path of a Chromium to drive, or "".
func findChromium() string {
	if p := os.Getenv("DETOUR_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// screenshot writes the page as a PNG to the test's artifact directory.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG; less is JPEG
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(t.ArtifactDir(), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// httptestServer serves p's Handler until the test ends and returns its
// root URL.
func httptestServer(t *testing.T, p *service.Processor) string {
	t.Helper()
	srv := httptest.NewServer(p.Handler())
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

// TestStatusPageShowsTheOperatorsActs loads / in headless Chromium while an
// operator trips a provider and then resets it: the provider's row names
// the operator and the reason of the cooldown, then the reset, and the
// event list shows both as the operator's, without a reload.
func TestStatusPageShowsTheOperatorsActs(t *testing.T) {
	browser := findChromium()
	if browser == "" {
		t.Skip("no Chromium found (chromium, chromium-browser, google-chrome or headless-shell on PATH, or $DETOUR_CHROMIUM): .ci/run installs Debian's chromium")
	}
	h := newHarness(t)
	file := parseChainFile(t, outageChain("http://127.0.0.1:1", "http://127.0.0.1:1", 3))
	p := h.assemble(file, testSettings(), false, withMetrics(metrics.New()))
	p.run()
	web := httptestServer(t, p.Processor)

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1000, 900))...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	defer cancelTimeout()
	const row = `tr[data-provider="dead"]`
	if err := chromedp.Do(ctx, chromedp.Navigate(web), chromedp.WaitVisible(row+`[data-state="closed"]`)); err != nil {
		t.Fatalf("the page shows no closed row for dead: %v", err)
	}

	fleet := operator.Fleet{JS: h.js, File: file, Path: "detour.yaml", By: "alice@ops-host"}
	if _, err := fleet.Trip(context.Background(), "dead", 10*time.Minute, "vendor maintenance"); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(row+`[data-state="open"]`), chromedp.WaitVisible(`#events li[data-event="opened"]`)); err != nil {
		t.Fatalf("the page never showed dead open: %v", err)
	}
	if note := text(t, ctx, row+" td.operator"); !strings.HasPrefix(note, "tripped by operator alice@ops-host until ") || !strings.HasSuffix(note, ": vendor maintenance") {
		t.Errorf("operator cell of the open row %q", note)
	}
	if ev := text(t, ctx, `#events li[data-event="opened"]`); !strings.HasSuffix(ev, "dead opened for 600s by operator alice@ops-host: vendor maintenance") {
		t.Errorf("opened event %q", ev)
	}
	screenshot(t, ctx, "statuspage-operator-trip.png")

	if _, err := fleet.Reset(context.Background(), []string{"dead"}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(row+`[data-state="closed"]`), chromedp.WaitVisible(`#events li[data-event="reset"]`)); err != nil {
		t.Fatalf("the page never showed the reset: %v", err)
	}
	if note := text(t, ctx, row+" td.operator"); !strings.HasPrefix(note, "reset by operator alice@ops-host at ") {
		t.Errorf("operator cell of the reset row %q", note)
	}
	if ev := text(t, ctx, `#events li[data-event="reset"]`); !strings.HasSuffix(ev, "dead reset by operator alice@ops-host") {
		t.Errorf("reset event %q", ev)
	}
	screenshot(t, ctx, "statuspage-operator-reset.png")
}
