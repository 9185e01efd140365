// Command bench measures detour against a minimal JetStream pipeline on this
// machine: throughput and CPU per request over a preloaded backlog, latency
// at a fixed rate, scaling over processors, the cost of an outage and the
// memory per request in flight (beside what net/http alone needs for the
// same calls), next to the performance targets of BENCHMARKS.md.
//
//	bench [-quick] [-run throughput,latency,scaling,outage,memory] [-rounds 5]
//	      [-json FILE] [-url nats://…] [-processor PATH] [sizes…]
//
// It prints progress on stderr and, at the end, a table per scenario on
// stdout; -json writes the same report as JSON. By default it starts an
// embedded NATS server and builds ./cmd/processor (run it from the module).
// Every process it starts is stopped when it ends, Ctrl-C included. The
// exit code is 0 when every scenario ran (whether or not the targets hold),
// 1 when one failed or the run was interrupted, and 2 for bad flags.
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
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := bench.Default()
	quick := fs.Bool("quick", false, "a smoke test: every scenario once at small sizes, in seconds; its figures mean nothing")
	jsonFile := fs.String("json", "", "also write the report as JSON to `FILE`")
	url := fs.String("url", "", "an external NATS server of the bench's own (it purges detour's streams and bucket there); default: embedded")
	processor := fs.String("processor", "", "the processor binary (default: build ./cmd/processor)")
	against := fs.String("against", "", "another processor `binary` (an earlier build) to measure beside it in the throughput scenario")
	scenarios := fs.String("run", strings.Join(bench.Scenarios, ","), "scenarios to run, comma-separated")
	rounds := fs.Int("rounds", def.Rounds, "rounds of each figure; the report shows medians")
	warmUp := fs.Bool("warmup", def.WarmUp, "run one discarded throughput round of each pipeline first")
	requests := fs.Int("requests", def.Requests, "preloaded backlog of the throughput and in-process scaling runs")
	requestBytes := fs.Int("request-bytes", def.RequestBytes, "size of each JSON request")
	workers := fs.Int("workers", def.Workers, "workers of the baseline and of the processor in the throughput and latency runs")
	rate := fs.Int("rate", def.Rate, "requests per second offered in the latency runs")
	latencyFor := fs.Duration("latency-for", def.LatencyFor, "how long the latency runs offer requests, after their warm-up")
	scale := fs.String("scale", joinInts(def.ScaleProcs), "processor counts of the scaling runs")
	scaleWorkers := fs.Int("scale-workers", def.ScaleWorkers, "workers of a processor in the scaling runs")
	scaleFor := fs.Duration("scale-for", def.ScaleFor, "sizes the slow scaling backlogs: what the workers could answer in this time")
	outageRequests := fs.Int("outage-requests", def.OutageRequests, "requests of an outage run")
	memoryInFlight := fs.Int("memory-in-flight", def.MemoryInFlight, "requests held in flight in a memory run")
	stall := fs.Duration("stall", def.Stall, "fail a run when no result arrives for this long")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "bench: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	opts := def
	if *quick {
		opts = bench.Quick()
	}
	var badScale error
	// Flags given explicitly override the preset.
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "rounds":
			opts.Rounds = *rounds
		case "warmup":
			opts.WarmUp = *warmUp
		case "requests":
			opts.Requests = *requests
		case "request-bytes":
			opts.RequestBytes = *requestBytes
		case "workers":
			opts.Workers = *workers
		case "rate":
			opts.Rate = *rate
		case "latency-for":
			opts.LatencyFor = *latencyFor
		case "scale":
			opts.ScaleProcs, badScale = parseInts(*scale)
		case "scale-workers":
			opts.ScaleWorkers = *scaleWorkers
		case "scale-for":
			opts.ScaleFor = *scaleFor
		case "outage-requests":
			opts.OutageRequests = *outageRequests
		case "memory-in-flight":
			opts.MemoryInFlight = *memoryInFlight
		case "stall":
			opts.Stall = *stall
		}
	})
	if badScale != nil {
		fmt.Fprintf(stderr, "bench: -scale: %v\n", badScale)
		return 2
	}
	opts.URL, opts.Processor, opts.Against, opts.Progress = *url, *processor, *against, stderr
	opts.Run = strings.Split(*scenarios, ",")
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
		if werr := bench.WriteTable(stdout, rep); werr != nil && err == nil {
			err = werr
		}
		if *jsonFile != "" {
			if werr := writeJSON(*jsonFile, rep); werr != nil && err == nil {
				err = werr
			}
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

// runBaseline is the hidden "bench baseline" command the bench starts as
// the baseline's processes: the JetStream pipeline, or with -http the
// memory scenario's calls made by net/http alone.
func runBaseline(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench baseline", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "", "NATS server")
	workers := fs.Int("workers", bench.DefaultWorkers(), "requests handled at once")
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

func writeJSON(path string, rep *bench.Report) error {
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func parseInts(s string) ([]int, error) {
	var ns []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", f)
		}
		ns = append(ns, n)
	}
	return ns, nil
}
