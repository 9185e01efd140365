package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/client"
)

// progress is the bar a bulk run draws on a terminal's stderr; on anything
// else it draws nothing. Its methods may be called from any goroutine.
type progress struct {
	mu       sync.Mutex
	bar      *progressbar.ProgressBar // nil: no bar
	noun     string
	degraded int
	failed   int
}

// newProgress returns a bar counting to total results (or, when results are
// not awaited, publishes), shown only for more than one request and only
// when w is a terminal, so logs and pipes get no control characters.
func newProgress(w io.Writer, total int, wait bool) *progress {
	p := &progress{noun: "results"}
	if !wait {
		p.noun = "published"
	}
	if total < 2 || !isTerminal(w) {
		return p
	}
	p.bar = progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(p.noun),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("req"),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
	_ = p.bar.RenderBlank()
	return p
}

// isTerminal reports whether w is a character device such as a terminal.
// The standard library's test is enough here: the other character devices
// (/dev/null) take a bar as harmlessly as a terminal does.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// add counts a publish or a result, whichever the bar counts.
func (p *progress) add(o client.Outcome) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar == nil {
		return
	}
	if o.Result.Degraded {
		p.degraded++
	}
	if o.HasResult() && o.Result.Status != chain.StatusOK {
		p.failed++
	}
	if p.degraded+p.failed > 0 {
		p.bar.Describe(fmt.Sprintf("%s (%d degraded, %d failed)", p.noun, p.degraded, p.failed))
	}
	_ = p.bar.Add(1)
}

// above runs print with the bar erased, so a line written to the same
// terminal does not land inside the bar; the bar comes back on its next
// update.
func (p *progress) above(print func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		_ = p.bar.Clear()
	}
	print()
}

// close erases the bar for good, whether or not it reached its end.
func (p *progress) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		_ = p.bar.Exit()
		_ = p.bar.Clear()
		p.bar = nil
	}
}
