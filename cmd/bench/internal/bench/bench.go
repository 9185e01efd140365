package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/nats-io/nuid"
)

// readyTimeout bounds a process's start, until it is consuming.
const readyTimeout = time.Minute

// Bench is one run: its server, its processes and what it measured so far.
type Bench struct {
	opts      Options
	broker    *broker
	dir       string
	processor string
	// runID makes request ids unique across runs on one server, whose
	// duplicate window would otherwise drop a request id seen before; it
	// is a NUID, of fixed length, so that no seq runs into it. seq numbers
	// the runs within a Bench.
	runID string
	seq   int
}

// Run measures the scenarios of opts, which must pass Check, and returns the
// report. A scenario that fails is recorded in Report.Errors and the others
// still run; the error returned is for a run that could not start, or was
// interrupted. Every process it started is stopped before it returns.
func Run(ctx context.Context, opts Options) (*Report, error) {
	opts.Progress = cmp.Or(opts.Progress, io.Writer(io.Discard))
	opts.ScaleProcs = slices.Compact(slices.Sorted(slices.Values(opts.ScaleProcs)))
	dir, err := os.MkdirTemp("", "detour-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	b := &Bench{opts: opts, dir: dir, processor: opts.Processor, runID: nuid.Next()}
	if b.processor == "" {
		if b.processor, err = buildProcessor(ctx, dir); err != nil {
			return nil, err
		}
	}
	if b.broker, err = startBroker(ctx, opts.URL, filepath.Join(dir, "nats")); err != nil {
		return nil, err
	}
	defer b.broker.close()
	rep := b.newReport()
	defer func() { rep.Machine.LoadEnd = loadAverage() }()
	for _, s := range Scenarios {
		if !slices.Contains(opts.Run, s) {
			continue
		}
		b.progress("%s", s)
		var err error
		switch s {
		case Throughput:
			rep.Throughput, err = b.throughput(ctx)
		case Latency:
			rep.Latency, err = b.latency(ctx)
		case Scaling:
			rep.Scaling, err = b.scaling(ctx)
		case Outage:
			rep.Outage, err = b.outage(ctx)
		case Memory:
			rep.Memory, err = b.memory(ctx)
		}
		if err != nil && ctx.Err() != nil {
			return rep, context.Cause(ctx)
		} else if err != nil {
			rep.Errors[s] = err.Error()
			b.progress("%s failed: %v", s, err)
		}
	}
	rep.evaluate()
	return rep, nil
}

// rounds measures every item in each of the rounds, reversing their order
// every other round so that a drift of the machine does not always favour
// the same one, and logs the line each measure returns. The results of
// items[i] are the i-th of the returned.
func rounds[T, R any](b *Bench, scenario string, items []T, measure func(T) (R, string, error)) ([][]R, error) {
	results := make([][]R, len(items))
	for r := range b.opts.Rounds {
		for k := range items {
			i := k
			if r%2 == 1 {
				i = len(items) - 1 - k
			}
			res, line, err := measure(items[i])
			if err != nil {
				return nil, err
			}
			results[i] = append(results[i], res)
			b.progress("%s round %d/%d: %s", scenario, r+1, b.opts.Rounds, line)
		}
	}
	return results, nil
}

func (b *Bench) progress(format string, args ...any) {
	fmt.Fprintf(b.opts.Progress, "bench: "+format+"\n", args...)
}

// buildProcessor builds ./cmd/processor of the module the working directory
// is in.
func buildProcessor(ctx context.Context, dir string) (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(dir, "processor")
	out, err := exec.CommandContext(ctx, goTool, "build", "-o", bin, "github.com/detourhq/detour/cmd/processor").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building the processor (run from the detour module, or pass -processor): %w\n%s", err, out)
	}
	return bin, nil
}
