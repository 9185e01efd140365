package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/detourhq/detour/config"
)

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
