package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/cmd/internal/requestfile"
	"github.com/detourhq/detour/cmd/processor/internal/chains"
	"github.com/detourhq/detour/cmd/processor/internal/demo"
	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/internal/suggest"
)

// runCheck sends fixed samples to every provider of a chain directly:
// `processor check -samples FILE.jsonl [-chain default] [-config FILE]`.
func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("processor check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	samplesPath := fs.String("samples", "", "JSON Lines file of requests (shape of docs/requests.md, or {\"prompt\": …}), one per line")
	chainName := fs.String("chain", "default", "chain whose providers to check")
	configPath := fs.String("config", "", "chain file (default $DETOUR_CONFIG, else detour.yaml)")
	demoMode := fs.Bool("demo", false, "check the demo's chain, with fake providers of its own started as the demo starts them")
	if code, ok := parseArgs(fs, args, stderr); !ok {
		return code
	}
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(stderr, "processor check: "+format+"\n", args...)
		return code
	}
	if *samplesPath == "" {
		return fail(2, "-samples FILE is required")
	}
	if *demoMode && *configPath != "" {
		return fail(2, "give -demo or -config, not both")
	}
	path := config.ChainFile(*configPath)
	var file *config.File
	var err error
	if *demoMode {
		// Started as the demo starts its own: primary is in its first minute.
		d, err := demo.Start(time.Now())
		if err != nil {
			return fail(1, "%v", err)
		}
		defer d.Close()
		file, path = d.File, "the demo"
	} else if file, err = config.Load(path); err != nil {
		fmt.Fprintf(stderr, "processor check: %v\n", err)
		if errors.Is(err, os.ErrNotExist) {
			fmt.Fprintln(stderr, "(name the chain file with -config FILE, or check the demo's chain with -demo)")
		}
		return config.ExitConfig
	}
	f, err := os.Open(*samplesPath)
	if err != nil {
		return fail(2, "%v", err)
	}
	samples, err := requestfile.ReadSamples(f, *samplesPath)
	f.Close()
	if err != nil {
		return fail(2, "%v", err)
	}
	built, err := chains.Build(file, nil, nil, nil)
	if err != nil {
		return fail(2, "%v", err)
	}
	c, ok := built[*chainName]
	if !ok {
		hint := "its chains: " + strings.Join(file.ChainNames(), ", ")
		if s, ok := suggest.Closest(*chainName, file.ChainNames()); ok {
			hint = fmt.Sprintf("did you mean %q?", s)
		}
		return fail(2, "no chain named %q in %s (%s)", *chainName, path, hint)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	results := chain.Check(ctx, c.Steps, samples)
	if err := chain.WriteCheck(stdout, results, len(samples)); err != nil {
		if !errors.Is(err, chain.ErrCheckFailed) {
			return fail(1, "%v", err)
		}
		return 1
	}
	return 0
}
