package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/cmd/processor/internal/fleet"
	"github.com/detourhq/detour/cmd/processor/internal/operator"
	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/internal/text"
)

const resetUsage = `usage: processor reset [-config FILE] PROVIDER...

Ends each provider's cooldown and clears its failures and trips, for every
processor at once: they call it again within a moment. The providers are
the chain file's. Where running processors define one differently, every
definition's circuit is reset; PROVIDER=<8 hex digits> (as processor
status shows it) resets one. Logged by every processor as the operator's
act (user@host).
`

const tripUsage = `usage: processor trip PROVIDER -for D -reason TEXT [-config FILE]

Opens an operator's cooldown of the provider for D (whole seconds, at
least 1s, at most its longest cooldown: the larger of max_cooldown and
auth_cooldown): every processor skips it until then, and sends it one
probe after (half-open). A running cooldown that ends later is left as it
is. Where running processors define the provider differently, every
definition's circuit is tripped; PROVIDER=<8 hex digits> (as processor
status shows it) trips one. Logged by every processor as the operator's
act (user@host).
`

// runReset runs `processor reset PROVIDER...` (package operator).
func runReset(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("processor reset", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	configPath := fs.String("config", "", "chain file whose providers may be named (default $DETOUR_CONFIG, else detour.yaml)")
	names, err := dlqParse(fs, args)
	if err != nil {
		return usageExit(fs, err, resetUsage, resetUsage, stdout, stderr)
	}
	fleet, code := operatorFleet("processor reset", *configPath, stderr)
	if code != 0 {
		return code
	}
	if err := fleet.CheckReset(names); err != nil {
		return operatorFailed("processor reset", resetUsage, err, stderr)
	}
	return withFleet("processor reset", "detour-reset", &fleet, false, stderr, func(ctx context.Context) error {
		results, err := fleet.Reset(ctx, names)
		return cmp.Or(err, operator.WriteReset(stdout, results))
	})
}

// runTrip runs `processor trip PROVIDER -for D -reason TEXT` (package
// operator).
func runTrip(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("processor trip", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	configPath := fs.String("config", "", "chain file that defines the provider (default $DETOUR_CONFIG, else detour.yaml)")
	d := fs.Duration("for", 0, "how long the cooldown lasts: whole seconds, at least 1s (30m, 2h)")
	reason := fs.String("reason", "", "why, for whoever sees the cooldown (at most 300 bytes)")
	names, err := dlqParse(fs, args)
	if err == nil && len(names) != 1 {
		err = errors.New("name one provider to trip")
	}
	if err != nil {
		return usageExit(fs, err, tripUsage, tripUsage, stdout, stderr)
	}
	fleet, code := operatorFleet("processor trip", *configPath, stderr)
	if code != 0 {
		return code
	}
	if err := fleet.CheckTrip(names[0], *d, *reason); err != nil {
		return operatorFailed("processor trip", tripUsage, err, stderr)
	}
	return withFleet("processor trip", "detour-trip", &fleet, true, stderr, func(ctx context.Context) error {
		res, err := fleet.Trip(ctx, names[0], *d, *reason)
		if res.Provider != "" {
			err = cmp.Or(err, operator.WriteTrip(stdout, res))
		}
		return err
	})
}

// operatorFleet reads the chain file that names the providers, without
// their API keys; one refused or missing is exit 78. With none named and
// no detour.yaml (beside a demo), the running processors name them.
func operatorFleet(cmd, configPath string, stderr io.Writer) (operator.Fleet, int) {
	path := config.ChainFile(configPath)
	file, err := config.LoadWithoutKeys(path)
	_, envSet := os.LookupEnv(configVariable)
	fallback := errors.Is(err, os.ErrNotExist) && configPath == "" && !envSet
	if fallback {
		if running := runningFile(cmd, stderr); running != nil {
			return operator.Fleet{File: running, Path: "the running processors' chain files", By: operator.Identity()}, 0
		}
	}
	switch {
	case fallback:
		fmt.Fprintf(stderr, "%s: no chain file %s here, and no running processor answered to say which providers there are\n", cmd, path)
		fmt.Fprintln(stderr, "(name the chain file the processors run with -config FILE or DETOUR_CONFIG, or start a processor first: go run ./cmd/processor -demo)")
		return operator.Fleet{}, config.ExitConfig
	case err != nil:
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		if errors.Is(err, os.ErrNotExist) {
			fmt.Fprintln(stderr, "(name the chain file the processors run with -config FILE or DETOUR_CONFIG: it says which providers there are)")
		}
		return operator.Fleet{}, config.ExitConfig
	}
	return operator.Fleet{File: file, Path: path, By: operator.Identity()}, 0
}

// runningFile is the running processors' providers; nil when none answers.
func runningFile(cmd string, stderr io.Writer) *config.File {
	nc, js, err := connectClient("detour-operator")
	if err != nil {
		return nil
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	running, err := fleet.Running(ctx, js)
	if err != nil {
		fmt.Fprintf(stderr, "%s: asking the running processors what they run: %s\n", cmd, text.VisibleError(err))
	}
	return operator.RunningFile(running)
}

// withFleet connects f, asks the running processors what they run when
// running is set, and runs do; it returns the exit code.
func withFleet(cmd, name string, f *operator.Fleet, running bool, stderr io.Writer, do func(context.Context) error) int {
	return withClient(cmd, name, stderr, func(ctx context.Context, js jetstream.JetStream) int {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		f.JS = js
		if running {
			var err error
			if f.Running, err = fleet.Running(ctx, js); err != nil {
				fmt.Fprintf(stderr, "%s: asking the running processors what they run: %s\n", cmd, text.VisibleError(err))
			}
		}
		if err := do(ctx); err != nil {
			return operatorFailed(cmd, "", err, stderr)
		}
		return 0
	})
}

// operatorFailed reports err: bad usage (exit 2, with the usage when
// given) or a failure (exit 1).
func operatorFailed(cmd, usage string, err error, stderr io.Writer) int {
	fmt.Fprintf(stderr, "%s: %s\n", cmd, text.VisibleError(err))
	if errors.Is(err, operator.ErrUsage) {
		fmt.Fprint(stderr, usage)
		return 2
	}
	return exitCode(err)
}
