// Command publisher sends requests to detour and prints their results; with
// many requests it is a load generator that ends with a summary. Its flags,
// output and exit codes are those of docs/commands.md#publisher.
//
//	publisher [-chain default] [-n 1 | -f requests.jsonl] [-rate 0] [-schema FILE]
//	          [-wait=true] [-timeout 1m] [-json] [PROMPT]
//
// It connects to DETOUR_NATS_URL or, when that is empty, to the embedded
// server of a local processor on DETOUR_LISTEN.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/detourhq/detour/client"
	"github.com/detourhq/detour/cmd/publisher/internal/report"
	"github.com/detourhq/detour/cmd/publisher/internal/requests"
	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/internal/buildinfo"
	"github.com/detourhq/detour/internal/text"
	"github.com/detourhq/detour/natsconn"
)

func main() {
	// The first interrupt stops publishing and lets the results of what was
	// sent arrive (up to -timeout); a second one stops waiting. Either way the
	// summary of what arrived is printed. The goroutine ends with the process.
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(context.Background())
	stop := make(chan struct{})
	go func() {
		<-signals
		close(stop)
		fmt.Fprintln(os.Stderr, "\npublisher: stopped sending; waiting for the results of what was sent (interrupt again to stop now)")
		<-signals
		cancel()
	}()
	code := run(ctx, stop, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	cancel()
	os.Exit(code)
}

// run is the command: stop closing ends publishing early, ctx ending ends
// the run.
func run(ctx context.Context, stop <-chan struct{}, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	f, code, ok := parseFlags(args, stderr)
	if !ok {
		return code
	}
	if f.version {
		fmt.Fprintln(stdout, "publisher", buildinfo.Read())
		return 0
	}
	complain := func(err error) { fmt.Fprintf(stderr, "publisher: %s\n", text.VisibleError(err)) }
	settings, err := config.LoadSettings()
	if err != nil {
		complain(err)
		return config.ExitConfig
	}
	reqs, err := requests.Load(requests.Source{Prompt: f.prompt, N: f.n, File: f.file, Schema: f.schema}, stdin, settings.ReplyPrefixes)
	if err != nil {
		complain(err)
		return 2
	}
	nc, err := natsconn.ConnectClient(settings, "detour-publisher")
	if err != nil {
		complain(err)
		return 1
	}
	defer nc.Close()
	c, err := client.New(nc)
	if err != nil {
		complain(err)
		return 1
	}

	bulk := len(reqs) > 1
	bar := newProgress(stderr, len(reqs), f.wait)
	enc := json.NewEncoder(stdout)
	opts := client.Options{Wait: f.wait, Rate: f.rate, Timeout: f.timeout, Stop: stop}
	opts.OnRetry = func(err error) { bar.above(func() { complain(fmt.Errorf("publishing failed, retrying: %w", err)) }) }
	switch {
	case f.json && f.wait:
		opts.OnResult = func(o client.Outcome) {
			bar.above(func() { _ = enc.Encode(o.Result) })
			bar.add(o)
		}
	case f.wait:
		opts.OnResult = bar.add
	default:
		opts.OnPublished = bar.add
	}
	outcomes, runErr := c.PublishAll(ctx, f.chain, reqs, opts)
	bar.close()
	if runErr != nil {
		complain(runErr)
	}
	sum := report.Summarize(f.chain, outcomes)
	switch {
	case sum.Sent == 0:
		if runErr == nil {
			fmt.Fprintln(stderr, "publisher: stopped before sending anything")
		}
		return 1
	case !f.wait:
		report.PrintPublished(stdout, f.chain, f.json, outcomes, sum.Sent)
	case bulk && f.json:
		_ = enc.Encode(map[string]report.Summary{"summary": sum})
	case bulk:
		_ = sum.WriteText(stdout)
	case f.json:
		report.PrintMissing(stderr, outcomes)
	default:
		report.PrintOutcomes(stdout, outcomes)
	}
	if runErr != nil || sum.Unsent > 0 || (f.wait && sum.Failures() > 0) {
		return 1
	}
	return 0
}
