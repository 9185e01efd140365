package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/cache"
	"github.com/detourhq/detour/internal/text"
)

const cacheUsage = `usage: processor cache stats [-chain C] [-json]
       processor cache purge [-chain C]

The response cache lives in the KV bucket detour_cache, one key per
<chain>.<scope>.<request fingerprint>.

  stats  one row per chain: CHAIN ENTRIES FRESH STALE EXPIRED BYTES
  purge  remove every entry of the chain (-chain), or of every chain, and
         print how many were removed

C is a chain name as the chain file allows it: [A-Za-z0-9_-]+.

Connects like every client command: DETOUR_NATS_URL, else the embedded
server on DETOUR_LISTEN.
`

// runCache runs `processor cache ...`; the work is done by package cache.
func runCache(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, cacheUsage)
		return 2
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet("processor cache "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	chainName := fs.String("chain", "", "only this chain's entries")
	asJSON := false
	switch cmd {
	case "stats":
		fs.BoolVar(&asJSON, "json", false, "one JSON object per chain")
	case "purge":
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, cacheUsage)
		return 0
	default:
		fmt.Fprintf(stderr, "processor cache: unknown command %q\n%s", cmd, cacheUsage)
		return 2
	}
	err := fs.Parse(args)
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err == nil {
		err = cache.CheckChainName(*chainName)
	}
	if err != nil {
		return usageExit(fs, err, cacheUsage, cacheUsage, stdout, stderr)
	}
	return withClient("processor cache", "detour-cache", stderr, func(ctx context.Context, js jetstream.JetStream) int {
		if cmd == "purge" {
			n, err := cache.Purge(ctx, js, *chainName)
			if err != nil {
				fmt.Fprintf(stderr, "processor cache purge: %s\n", text.VisibleError(err))
				return 1
			}
			fmt.Fprintf(stdout, "removed %d\n", n)
			return 0
		}
		rows, err := cache.Stats(ctx, js, *chainName, time.Now())
		if err != nil {
			fmt.Fprintf(stderr, "processor cache stats: %s\n", text.VisibleError(err))
			return 1
		}
		if asJSON {
			if jsonLines(stdout, rows) != nil {
				return 1
			}
			return 0
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "CHAIN\tENTRIES\tFRESH\tSTALE\tEXPIRED\tBYTES")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\n", text.Visible(r.Chain), r.Entries, r.Fresh, r.Stale, r.Expired, r.Bytes)
		}
		if err := tw.Flush(); err != nil {
			return 1
		}
		return 0
	})
}
