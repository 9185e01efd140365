package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
)

// httpBaselineLine starts the one line the HTTP baseline prints: its
// measurement, as JSON.
const httpBaselineLine = "baseline http: "

// httpBaselineBody is the chat request the HTTP baseline sends: the shape of
// the OpenAI adapter's, for a short conversation.
const httpBaselineBody = `{"model":"bench-fake","messages":[{"role":"user","content":"Summarise the outage report in one line."}]}`

// httpBaselineResult is what the HTTP baseline measured of itself: its
// idle and peak resident sets in bytes, whether the peak is VmHWM, and how
// many calls failed, with the first failure's error.
type httpBaselineResult struct {
	Idle        int64  `json:"idle_bytes"`
	Peak        int64  `json:"peak_bytes"`
	PeakFromHWM bool   `json:"peak_from_vmhwm"`
	Failed      int    `json:"failed"`
	FirstError  string `json:"first_error,omitempty"`
}

// RunHTTPBaseline is the memory scenario's baseline, the least a process
// holds for calls provider calls in flight: net/http alone, with the client
// detour's providers use (chain.DefaultHTTPClient). Its goroutines, one per
// call, exist before it reads its idle resident set, as a processor's
// workers do; then they POST a chat request to url at once while it tracks
// its peak resident set as memoryRun does. Once every call has ended it
// prints httpBaselineLine and httpBaselineResult as JSON on one line. It
// returns ctx's error if ctx ends first.
func RunHTTPBaseline(ctx context.Context, url string, calls int, out io.Writer) error {
	pid := os.Getpid()
	start := make(chan struct{})
	release := sync.OnceFunc(func() { close(start) })
	var wg sync.WaitGroup
	defer wg.Wait()
	defer release()
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel() // on an early return: the calls end at once
	errs := make([]error, calls)
	for i := range calls {
		wg.Go(func() {
			<-start
			errs[i] = httpBaselineCall(callCtx, url)
		})
	}
	idle, hwm, err := idleMemory(ctx, pid)
	if err != nil {
		return err
	}
	res := httpBaselineResult{Idle: idle, Peak: idle, PeakFromHWM: hwm}
	release()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	err = sample(ctx, done, func() (err error) {
		res.Peak, err = samplePeak(pid, hwm, res.Peak)
		return err
	})
	if err != nil {
		return err
	}
	for _, err := range errs {
		if err != nil {
			res.FirstError = cmp.Or(res.FirstError, err.Error())
			res.Failed++
		}
	}
	line, _ := json.Marshal(res) // cannot fail: numbers and strings
	_, err = fmt.Fprintf(out, "%s%s\n", httpBaselineLine, line)
	return err
}

// httpBaselineCall makes one call and reads its whole answer, as the
// adapters do.
func httpBaselineCall(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(httpBaselineBody))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer bench")
	resp, err := chain.DefaultHTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// httpBaselineRun runs the HTTP baseline once, on a fake provider that
// answers after MemoryDelay, and divides its growth by the calls the fake
// held at once, as memoryRun does for a processor.
func (b *Bench) httpBaselineRun(ctx context.Context) (res memoryResult, err error) {
	fake := providertest.New(providertest.OpenAI, providertest.Slow(b.opts.MemoryDelay, providertest.OK()))
	defer fake.Close()
	argv := append(slices.Clone(b.opts.BaselineCommand), "-http", fake.URL+"/chat/completions", "-calls", fmt.Sprint(b.opts.MemoryInFlight))
	p, err := startProc(procSpec{name: "HTTP baseline", argv: argv, env: processEnv(), dir: b.dir, ready: httpBaselineLine})
	if err != nil {
		return res, err
	}
	defer func() { err = cmp.Or(err, stopProcs([]*proc{p})) }()
	limit := memorySettle + b.opts.MemoryDelay + b.opts.Stall
	limited, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	err = sample(limited, p.done, func() error {
		res.inFlight = max(res.inFlight, fake.InFlight())
		return nil
	})
	switch {
	case ctx.Err() != nil:
		return res, context.Cause(ctx)
	case err != nil:
		return res, fmt.Errorf("HTTP baseline not done after %s; its output ends:\n%s", limit, p.out.tail())
	case p.err != nil:
		return res, p.failure()
	}
	measured, err := parseHTTPBaseline(p.out.tail())
	if err != nil {
		return res, err
	}
	if measured.Failed > 0 {
		return res, fmt.Errorf("HTTP baseline: %d of %d calls failed, the first with: %s", measured.Failed, b.opts.MemoryInFlight, measured.FirstError)
	}
	if res.inFlight == 0 {
		return res, errors.New("HTTP baseline: the slow provider never held a call")
	}
	res.idle, res.peak, res.peakFromHWM = measured.Idle, measured.Peak, measured.PeakFromHWM
	return res, nil
}

// parseHTTPBaseline finds the HTTP baseline's line in its output.
func parseHTTPBaseline(output string) (httpBaselineResult, error) {
	var res httpBaselineResult
	for line := range strings.Lines(output) {
		if rest, ok := strings.CutPrefix(line, httpBaselineLine); ok {
			dec := json.NewDecoder(strings.NewReader(rest))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&res); err != nil {
				return res, fmt.Errorf("HTTP baseline's line %q: %w", strings.TrimSpace(line), err)
			}
			return res, nil
		}
	}
	return res, fmt.Errorf("HTTP baseline printed no result; its output ends:\n%s", output)
}
