// Command publisher sends requests to detour and prints their results.
//
//	publisher [-chain default] [-n 1] [-timeout 60s] [-json] [-wait=true] PROMPT
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
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/internal/client"
	"github.com/detourhq/detour/stream"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("publisher", flag.ContinueOnError)
	fs.SetOutput(stderr)
	chainName := fs.String("chain", "default", "chain to send to")
	n := fs.Int("n", 1, "number of copies of the request to send")
	timeout := fs.Duration("timeout", time.Minute, "how long to wait for the results")
	wait := fs.Bool("wait", true, "wait for the results and print them")
	asJSON := fs.Bool("json", false, "print each result as one JSON line")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: publisher [flags] PROMPT")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	prompt := strings.Join(fs.Args(), " ")
	if prompt == "" || *n < 1 {
		fs.Usage()
		return 2
	}
	settings, err := config.LoadSettings()
	if err != nil {
		fmt.Fprintf(stderr, "publisher: settings: %v\n", err)
		return 2
	}
	nc, err := stream.Connect(settings.ClientURL(), stream.ConnectOptions{
		Name: "detour-publisher", Creds: settings.NATSCreds,
		TLSCA: settings.NATSTLSCA, TLSCert: settings.NATSTLSCert, TLSKey: settings.NATSTLSKey,
	})
	if err != nil {
		fmt.Fprintf(stderr, "publisher: %v\n", err)
		if errors.Is(err, nats.ErrNoServers) {
			fmt.Fprintln(stderr, "is a processor running? try `go run ./cmd/processor -demo`")
		}
		return 1
	}
	defer nc.Close()
	c, err := client.New(nc)
	if err != nil {
		fmt.Fprintf(stderr, "publisher: %v\n", err)
		return 1
	}
	reqs := make([]stream.Request, *n)
	for i := range reqs {
		reqs[i] = stream.Request{Messages: []chain.Message{{Role: "user", Content: prompt}}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	outcomes, err := c.Run(ctx, *chainName, reqs, *wait)
	if err != nil {
		fmt.Fprintf(stderr, "publisher: %v\n", err)
		return 1
	}
	if !*wait {
		fmt.Fprintf(stdout, "published %d request(s) to %s\n", len(outcomes), stream.RequestSubject(*chainName))
		return 0
	}
	return printOutcomes(stdout, outcomes, *asJSON)
}

// printOutcomes prints each result and returns 1 when any request failed or
// got no result.
func printOutcomes(w io.Writer, outcomes []client.Outcome, asJSON bool) int {
	code := 0
	enc := json.NewEncoder(w)
	for _, o := range outcomes {
		if o.Err != nil {
			code = 1
			fmt.Fprintf(w, "%s  no result: %v\n", o.ID, o.Err)
			continue
		}
		r := o.Result
		if r.Status != chain.StatusOK {
			code = 1
		}
		if asJSON {
			_ = enc.Encode(r)
			continue
		}
		fmt.Fprintf(w, "%s  %s  model=%s provider=%s degraded=%t attempts=%d latency=%dms\n",
			r.ID, r.Status, r.Model, r.Provider, r.Degraded, len(r.Attempts), r.LatencyMs)
		if r.Status == chain.StatusOK {
			fmt.Fprintf(w, "  %s\n", r.Content)
		} else {
			fmt.Fprintf(w, "  error: %s\n", r.Error)
		}
	}
	return code
}
