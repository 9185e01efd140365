// Command bench measures detour against a minimal JetStream pipeline on this
// machine, next to the performance targets; its scenarios, flags, output and
// exit codes are those of BENCHMARKS.md#running-the-bench.
//
//	bench [-quick] [-run throughput,latency,scaling,outage,memory] [-rounds 5]
//	      [-json FILE] [-url nats://…] [-processor PATH] [sizes…]
//
// Every process it starts is stopped when it ends, Ctrl-C included; an
// interrupted run exits 1, and bad flags 2.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/detourhq/detour/cmd/bench/internal/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "baseline" {
		return runBaseline(ctx, args[1:], stdout, stderr)
	}
	// The flags are read twice when -quick is given: its preset replaces
	// the defaults, and the flags given override it again.
	opts := bench.Default()
	quick, jsonFile, err := parseFlags(args, &opts, stderr)
	if err == nil && quick {
		opts = bench.Quick()
		_, _, err = parseFlags(args, &opts, io.Discard)
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2
	}
	opts.Progress = stderr
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	opts.BaselineCommand = []string{self, "baseline"}
	if err := opts.Check(); err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 2
	}

	started := time.Now()
	rep, err := bench.Run(ctx, opts)
	if rep != nil {
		err = errors.Join(err, bench.WriteTable(stdout, rep))
		if jsonFile != "" {
			data, jsonErr := json.MarshalIndent(rep, "", "  ")
			if jsonErr == nil {
				jsonErr = os.WriteFile(jsonFile, append(data, '\n'), 0o644)
			}
			err = errors.Join(err, jsonErr)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "bench: done in %s\n", time.Since(started).Round(time.Second))
	if len(rep.Errors) > 0 {
		return 1
	}
	return 0
}

// parseFlags sets the fields of o that args name, the others keeping their
// value as the flags' defaults.
func parseFlags(args []string, o *bench.Options, out io.Writer) (quick bool, jsonFile string, err error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.BoolVar(&quick, "quick", false, "a smoke test: every scenario once at small sizes, in seconds; its figures mean nothing")
	fs.StringVar(&jsonFile, "json", "", "also write the report as JSON to `FILE`")
	fs.StringVar(&o.URL, "url", o.URL, "an external NATS server of the bench's own (it purges detour's streams and bucket there); default: embedded")
	fs.StringVar(&o.Processor, "processor", o.Processor, "the processor binary (default: build ./cmd/processor)")
	fs.StringVar(&o.Against, "against", o.Against, "another processor `binary` (an earlier build) to measure beside it in the throughput scenario")
	fs.Func("run", "scenarios to run, comma-separated (default "+strings.Join(o.Run, ",")+")", func(s string) error {
		o.Run = strings.Split(s, ",")
		return nil
	})
	fs.IntVar(&o.Rounds, "rounds", o.Rounds, "rounds of each figure; the report shows medians")
	fs.BoolVar(&o.WarmUp, "warmup", o.WarmUp, "run one discarded throughput round of each pipeline first")
	fs.IntVar(&o.Requests, "requests", o.Requests, "preloaded backlog of the throughput and in-process scaling runs")
	fs.IntVar(&o.RequestBytes, "request-bytes", o.RequestBytes, "size of each JSON request")
	fs.IntVar(&o.Workers, "workers", o.Workers, "workers of the baseline and of the processor in the throughput and latency runs")
	fs.IntVar(&o.Rate, "rate", o.Rate, "requests per second offered in the latency runs")
	fs.DurationVar(&o.LatencyFor, "latency-for", o.LatencyFor, "how long the latency runs offer requests, after their warm-up")
	scale := strings.ReplaceAll(strings.Trim(fmt.Sprint(o.ScaleProcs), "[]"), " ", ",")
	fs.Func("scale", "processor counts of the scaling runs (default "+scale+")", func(s string) error {
		o.ScaleProcs = nil
		for f := range strings.SplitSeq(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				return fmt.Errorf("%q is not a number", f)
			}
			o.ScaleProcs = append(o.ScaleProcs, n)
		}
		return nil
	})
	fs.IntVar(&o.ScaleWorkers, "scale-workers", o.ScaleWorkers, "workers of a processor in the scaling runs")
	fs.DurationVar(&o.ScaleFor, "scale-for", o.ScaleFor, "sizes the slow scaling backlogs: what the workers could answer in this time")
	fs.IntVar(&o.OutageRequests, "outage-requests", o.OutageRequests, "requests of an outage run")
	fs.IntVar(&o.MemoryInFlight, "memory-in-flight", o.MemoryInFlight, "requests held in flight in a memory run")
	fs.DurationVar(&o.Stall, "stall", o.Stall, "fail a run when no result arrives for this long")
	if err = fs.Parse(args); err == nil && fs.NArg() > 0 {
		fmt.Fprintf(out, "bench: unexpected argument %q\n", fs.Arg(0))
		err = errors.New("unexpected argument")
	}
	return quick, jsonFile, err
}

// runBaseline is the hidden "bench baseline" command the bench starts as
// the baseline's processes: the JetStream pipeline, or with -http the
// memory scenario's calls made by net/http alone.
func runBaseline(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench baseline", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "", "NATS server")
	workers := fs.Int("workers", bench.Default().Workers, "requests handled at once")
	httpURL := fs.String("http", "", "instead, call this chat completions `URL` -calls times at once and print the memory used")
	calls := fs.Int("calls", 0, "calls in flight at once, with -http")
	const usage = "usage: bench baseline -url URL [-workers N] | bench baseline -http URL -calls N"
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	switch {
	case set["http"] && !set["url"] && !set["workers"] && *httpURL != "" && *calls >= 1:
		err = bench.RunHTTPBaseline(ctx, *httpURL, *calls, stdout)
	case set["url"] && !set["http"] && !set["calls"] && *url != "" && *workers >= 1:
		err = bench.RunBaseline(ctx, *url, *workers, stderr)
	default:
		fmt.Fprintln(stderr, usage)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench baseline: %v\n", err)
		return 1
	}
	return 0
}
