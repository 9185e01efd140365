package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/samber/lo"

	"github.com/detourhq/detour/cmd/processor/internal/fleet"
	"github.com/detourhq/detour/cmd/processor/internal/serverclock"
	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/internal/text"
	"github.com/detourhq/detour/kvstate"
)

// runStatus prints one row per provider: `processor status [-json]`.
func runStatus(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("processor status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the rows as a JSON array")
	configPath := fs.String("config", "", "chain file whose providers to list even without state (default $DETOUR_CONFIG, else detour.yaml)")
	if code, ok := parseArgs(fs, args, stderr); !ok {
		return code
	}
	known, note := chainProviders(*configPath)
	if note != "" {
		fmt.Fprintf(stderr, "processor status: %s; listing providers with recorded state only\n", note)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, nc, err := openBucket(ctx, "detour-status")
	if err != nil {
		fmt.Fprintf(stderr, "processor status: %s\n", text.VisibleError(err))
		return exitCode(err)
	}
	defer nc.Close()
	// Read only (it never opens a cooldown), and a snapshot: Load, no Run.
	store := kvstate.New(nil, kv, kvstate.Options{})
	if err := store.Load(ctx); err != nil {
		fmt.Fprintf(stderr, "processor status: %s\n", text.VisibleError(err))
		return 1
	}
	running := fleet.Instances(store.Running())
	if known == nil {
		// No chain file (beside a demo): the running processors' providers.
		known = fleet.Providers(running)
	}
	rows := store.Status(serverClock(ctx, kv).Now(), known...)
	conflicts := fleet.WithCircuits(fleet.Conflicts(running), store.Holder)
	chainConflicts := fleet.ChainConflicts(running)
	if *asJSON {
		// The rows, then one element per chain conflict: {"chain", "lists"}.
		out := append(lo.ToAnySlice(fleet.WithConflicts(rows, conflicts)), lo.ToAnySlice(chainConflicts)...)
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(out)
	} else {
		err = cmp.Or(kvstate.WriteStatus(stdout, rows), fleet.WriteConflicts(stdout, conflicts, chainConflicts))
	}
	if err != nil {
		fmt.Fprintf(stderr, "processor status: %s\n", text.VisibleError(err))
		return 1
	}
	return 0
}

// chainProviders names the chain file's providers, listed even without
// state. A missing detour.yaml, not named, is no news (beside a demo); a
// file named that cannot be read, or one refused, is worth a one-line note.
func chainProviders(configPath string) (known []string, note string) {
	path := config.ChainFile(configPath)
	file, err := config.LoadWithoutKeys(path) // status calls no provider
	if err == nil {
		return lo.Map(file.Providers, func(p config.Provider, _ int) string { return p.Name }), ""
	}
	_, envSet := os.LookupEnv(configVariable)
	missing := errors.Is(err, fs.ErrNotExist)
	switch {
	case missing && configPath == "" && !envSet:
		return nil, ""
	case missing:
		return nil, fmt.Sprintf("chain file %s not found", path)
	}
	var fe *config.FileError
	if errors.As(err, &fe) && len(fe.Problems) > 0 {
		note = fmt.Sprintf("chain file %s not read: %s", path, fe.Problems[0])
		if more := len(fe.Problems) - 1; more > 0 {
			note += fmt.Sprintf(" (and %d more: processor check -config %s lists them)", more, path)
		}
		return nil, note
	}
	first, _, _ := strings.Cut(err.Error(), "\n")
	return nil, fmt.Sprintf("chain file %s not read: %s", path, first)
}

// configVariable names the chain file when -config does not.
const configVariable = "DETOUR_CONFIG"

// runWatch runs `processor watch [-json] [-config FILE]`.
func runWatch(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("processor watch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print each event as one JSON line")
	configPath := fs.String("config", "", "chain file whose providers' state to print even without recorded state (default $DETOUR_CONFIG, else detour.yaml)")
	if code, ok := parseArgs(fs, args, stderr); !ok {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return watch(ctx, *configPath, *asJSON, stdout, stderr)
}

// watch is `processor watch` until ctx ends.
func watch(ctx context.Context, configPath string, asJSON bool, stdout, stderr io.Writer) int {
	known, note := chainProviders(configPath)
	if note != "" {
		fmt.Fprintf(stderr, "processor watch: %s; printing the state of providers with recorded state only\n", note)
	}
	kv, nc, err := openBucket(ctx, "detour-watch")
	if err != nil {
		fmt.Fprintf(stderr, "processor watch: %s\n", text.VisibleError(err))
		return exitCode(err)
	}
	defer nc.Close()
	if known == nil {
		// As status lists them: the running processors' providers.
		store := kvstate.New(nil, kv, kvstate.Options{})
		if err := store.Load(ctx); err != nil {
			fmt.Fprintf(stderr, "processor watch: %s\n", text.VisibleError(err))
			return 1
		}
		known = fleet.Providers(fleet.Instances(store.Running()))
	}
	enc := json.NewEncoder(stdout)
	fmt.Fprintf(stderr, "watching %s: the state of every provider, then outage events (opened, expired, probe, closed, reset); Ctrl-C to stop\n", kvstate.Bucket)
	err = kvstate.WatchEvents(ctx, kv, known, serverClock(ctx, kv).Now, func(e kvstate.Event) {
		if asJSON {
			_ = enc.Encode(e)
			return
		}
		// Made visible whole, none of its fields can break the line.
		fmt.Fprintln(stdout, text.Visible(e.String()))
	})
	if err != nil {
		fmt.Fprintf(stderr, "processor watch: %s\n", text.VisibleError(err))
		return 1
	}
	return 0
}

// openBucket connects and opens the provider bucket without creating it;
// the caller closes the connection.
func openBucket(ctx context.Context, name string) (jetstream.KeyValue, *nats.Conn, error) {
	nc, js, err := connectClient(name)
	if err != nil {
		return nil, nil, err
	}
	kv, err := js.KeyValue(ctx, kvstate.Bucket)
	if err != nil {
		nc.Close()
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return nil, nil, fmt.Errorf("bucket %s does not exist yet: no processor has started on this NATS", kvstate.Bucket)
		}
		return nil, nil, err
	}
	return kv, nc, nil
}

// serverClock tells the NATS server's time, by which processors judge
// cooldowns, read off the bucket; the local time when it cannot be read.
func serverClock(ctx context.Context, kv jetstream.KeyValue) *serverclock.Clock {
	clock := serverclock.New(nil, serverclock.BucketTime(kv), nil)
	_ = clock.Sync(ctx)
	return clock
}

// parseArgs parses the flags of a command that takes no arguments; when it
// should stop, ok is false and code its exit code: 0 for -help, 2 for bad
// usage, reported to stderr.
func parseArgs(fs *flag.FlagSet, args []string, stderr io.Writer) (code int, ok bool) {
	switch err := fs.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		return 0, false
	case err != nil:
		return 2, false
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		fs.SetOutput(stderr)
		fs.Usage()
		return 2, false
	}
	return 0, true
}
