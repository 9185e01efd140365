// Command publisher sends requests to detour and prints their results; with
// many requests it is a load generator that ends with a summary.
//
//	publisher [-chain default] [-n 1 | -f requests.jsonl] [-rate 0] [-schema FILE]
//	          [-wait=true] [-timeout 1m] [-json] [PROMPT]
//
// One request prints its result as a block (text) or a JSON line (-json).
// More than one shows a progress bar on stderr when stderr is a terminal,
// and ends with a summary on stdout: counts, degraded share, failures and
// p50/p95/p99 latency per provider and model, both the processor's
// latency_ms and the end-to-end time from publish to result. With -json
// each result is one JSON line as it arrives and the summary is a final
// {"summary": {...}} line. The exit code is 1 when any request failed, got
// no result or was not sent, 2 for bad flags or a bad requests file (which
// sends nothing), and 78 for a bad DETOUR_* setting.
//
// A requests file holds one request a line in the JSON shape of
// docs/requests.md; as a convenience a line may give "prompt": "text" in place of
// "messages". Blank lines are skipped; "-f -" reads standard input.
//
// It connects to DETOUR_NATS_URL or, when that is empty, to the embedded
// server of a local processor on DETOUR_LISTEN.
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
	"strings"
	"syscall"
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/internal/buildinfo"
	"github.com/detourhq/detour/internal/publisher"
	"github.com/detourhq/detour/internal/requestfile"
	"github.com/detourhq/detour/internal/text"
	"github.com/detourhq/detour/natsconn"
	"github.com/detourhq/detour/wire"
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

// flags are the command line, parsed.
type flags struct {
	chain   string
	n       int
	file    string
	rate    float64
	schema  string
	wait    bool
	timeout time.Duration
	json    bool
	prompt  string
	version bool
}

// parseFlags parses args; a usage error has been reported to stderr when ok
// is false, and code is the exit code.
func parseFlags(args []string, stderr io.Writer) (f flags, code int, ok bool) {
	fs := flag.NewFlagSet("publisher", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.chain, "chain", "default", "chain to send to")
	fs.IntVar(&f.n, "n", 1, "number of copies of PROMPT to send")
	fs.StringVar(&f.file, "f", "", "send the requests of this JSON Lines `file` (\"-\": standard input) instead of PROMPT;\none request a line in the JSON shape of docs/requests.md, or {\"prompt\": \"text\", ...} in place of messages;\na bad line is reported with its number and nothing is sent")
	fs.Float64Var(&f.rate, "rate", 0, "publish `n` requests per second (0: as fast as possible)")
	fs.StringVar(&f.schema, "schema", "", "JSON Schema `file` put into the response_schema of each request that has none")
	fs.BoolVar(&f.wait, "wait", true, "wait for the results and print them (-wait=false only publishes)")
	fs.DurationVar(&f.timeout, "timeout", time.Minute, "how long to wait for results after the last request is published, and to retry a failed publish (0: until interrupted)")
	fs.BoolVar(&f.json, "json", false, "print each result as one JSON line, and the summary as a final JSON line")
	fs.BoolVar(&f.version, "version", false, "print the version of this build and exit")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: publisher [flags] PROMPT\n       publisher [flags] -f requests.jsonl\n       publisher -version")
		fs.PrintDefaults()
		fmt.Fprintln(stderr, "\nExit code 1 when any request failed, got no result or was not sent; 2 for bad flags or input;\n78 for a bad DETOUR_* setting.")
		fmt.Fprintln(stderr, "Reference: docs/commands.md (requests: docs/requests.md; results: docs/results.md).")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return f, 0, false
		}
		return f, 2, false
	}
	if f.version {
		return f, 0, true
	}
	f.prompt = strings.Join(fs.Args(), " ")
	nSet := false
	fs.Visit(func(fl *flag.Flag) { nSet = nSet || fl.Name == "n" })
	var problem string
	switch {
	case f.file == "" && f.prompt == "":
		fs.Usage()
		return f, 2, false
	case f.file != "" && f.prompt != "":
		problem = "give a PROMPT or -f, not both"
	case f.file != "" && nSet:
		problem = "-n copies a PROMPT; with -f each line is sent once"
	case !config.ValidName(f.chain):
		problem = fmt.Sprintf("-chain %q: a chain is named as in the chain file, with letters, digits, _ and - (at most %d)", f.chain, config.MaxNameLen)
	case f.n < 1:
		problem = "-n must be at least 1"
	case f.rate < 0:
		problem = "-rate must not be negative"
	case f.timeout < 0:
		problem = "-timeout must not be negative"
	}
	if problem != "" {
		fmt.Fprintf(stderr, "publisher: %s\n", problem)
		return f, 2, false
	}
	return f, 0, true
}

// requests builds the requests of a run from the prompt or the file, and
// the schema. A file's reply_to must start with one of replyPrefixes, the
// processors' DETOUR_REPLY_PREFIXES.
func (f flags) requests(stdin io.Reader, replyPrefixes []string) ([]wire.Request, error) {
	var reqs []wire.Request
	if f.file == "" {
		reqs = publisher.Copies(f.prompt, f.n)
	} else {
		r, name := stdin, "stdin"
		if f.file != "-" {
			file, err := os.Open(f.file)
			if err != nil {
				return nil, err
			}
			defer file.Close()
			r, name = file, f.file
		}
		var err error
		if reqs, err = requestfile.Read(r, name, replyPrefixes); err != nil {
			return nil, err
		}
	}
	if f.schema != "" {
		file, err := os.Open(f.schema)
		if err != nil {
			return nil, fmt.Errorf("-schema: %w", err)
		}
		defer file.Close()
		schema, err := publisher.ReadSchema(file)
		if err != nil {
			return nil, fmt.Errorf("-schema %s: %w", f.schema, err)
		}
		publisher.WithSchema(reqs, schema)
	}
	return reqs, nil
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
	settings, err := config.LoadSettings()
	if err != nil {
		fmt.Fprintf(stderr, "publisher: %s\n", text.VisibleError(err))
		return config.ExitConfig
	}
	reqs, err := f.requests(stdin, settings.ReplyPrefixes)
	if err != nil {
		fmt.Fprintf(stderr, "publisher: %s\n", text.VisibleError(err))
		return 2
	}
	nc, err := natsconn.ConnectClient(settings, "detour-publisher")
	if err != nil {
		fmt.Fprintf(stderr, "publisher: %s\n", text.VisibleError(err))
		return 1
	}
	defer nc.Close()
	c, err := publisher.New(nc)
	if err != nil {
		fmt.Fprintf(stderr, "publisher: %s\n", text.VisibleError(err))
		return 1
	}

	bulk := len(reqs) > 1
	bar := newProgress(stderr, len(reqs), f.wait)
	enc := json.NewEncoder(stdout)
	opts := publisher.Options{Wait: f.wait, Rate: f.rate, Timeout: f.timeout, OnPublished: bar.published, OnResult: bar.result, Stop: stop}
	opts.OnRetry = func(err error) {
		bar.above(func() { fmt.Fprintf(stderr, "publisher: publishing failed, retrying: %s\n", text.VisibleError(err)) })
	}
	if f.json && f.wait {
		opts.OnResult = func(o publisher.Outcome) {
			bar.above(func() { _ = enc.Encode(o.Result) })
			bar.result(o)
		}
	}
	outcomes, runErr := c.Run(ctx, f.chain, reqs, opts)
	bar.close()
	if runErr != nil {
		fmt.Fprintf(stderr, "publisher: %s\n", text.VisibleError(runErr))
	}
	sum := publisher.Summarize(f.chain, outcomes)
	switch {
	case sum.Sent == 0:
		if runErr == nil {
			fmt.Fprintln(stderr, "publisher: stopped before sending anything")
		}
		return 1
	case !f.wait:
		printPublished(stdout, f, outcomes, sum.Sent)
	case bulk && f.json:
		_ = enc.Encode(map[string]publisher.Summary{"summary": sum})
	case bulk:
		_ = sum.WriteText(stdout)
	case f.json:
		printMissing(stderr, outcomes)
	default:
		printOutcomes(stdout, outcomes)
	}
	if runErr != nil || sum.Unsent > 0 || (f.wait && sum.Failures() > 0) {
		return 1
	}
	return 0
}

// printPublished reports a run that did not wait: how many requests went
// out and, with -json, their ids, so their results can be read later.
func printPublished(w io.Writer, f flags, outcomes []publisher.Outcome, sent int) {
	subject := wire.RequestSubject(f.chain)
	if !f.json {
		fmt.Fprintf(w, "published %d request(s) to %s\n", sent, text.Visible(subject))
		return
	}
	ids := []string{}
	for _, o := range outcomes {
		if !o.Published.IsZero() {
			ids = append(ids, o.ID)
		}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"published": sent, "subject": subject, "ids": ids})
}

// printMissing reports, for -json, the requests without a result; their
// results, if any, were printed as they arrived.
func printMissing(w io.Writer, outcomes []publisher.Outcome) {
	for _, o := range outcomes {
		if o.Err != nil {
			fmt.Fprintf(w, "publisher: %s: %s\n", text.Visible(o.ID), text.VisibleError(o.Err))
		}
	}
}

// printOutcomes prints each result as a block. What the result carries
// (id, status, model, provider, the answer, a provider's error) is shown
// through text.Visible: a provider or any client that can publish the
// result chooses it.
func printOutcomes(w io.Writer, outcomes []publisher.Outcome) {
	for _, o := range outcomes {
		if o.Err != nil {
			fmt.Fprintf(w, "%s  no result: %s\n", text.Visible(o.ID), text.VisibleError(o.Err))
			continue
		}
		r := o.Result
		// A failed result has no model or provider: they are left out
		// rather than printed empty.
		var fields []string
		if r.Model != "" {
			fields = append(fields, "model="+text.Visible(r.Model))
		}
		if r.Provider != "" {
			fields = append(fields, "provider="+text.Visible(r.Provider))
		}
		fields = append(fields, fmt.Sprintf("degraded=%t attempts=%d latency=%dms", r.Degraded, len(r.Attempts), r.LatencyMs))
		fmt.Fprintf(w, "%s  %s  %s\n", text.Visible(r.ID), text.Visible(string(r.Status)), strings.Join(fields, " "))
		if r.Status == chain.StatusOK {
			// The answer is the model's text: its lines stay lines, but
			// nothing in it reaches the terminal as a control.
			fmt.Fprintf(w, "  %s\n", text.VisibleLines(r.Content))
		} else {
			fmt.Fprintf(w, "  error: %s\n", text.Visible(r.Error))
		}
	}
}
