// Command processor runs detour: it consumes requests from JetStream and
// answers them through a fallback chain of LLM providers.
//
//	processor [run] [-demo] [-config FILE]
//	processor status|watch|reset|trip|check|dlq|cache ...
//
// Settings come from DETOUR_* environment variables; -help lists them all.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/detourhq/detour/cmd/processor/internal/demo"
	"github.com/detourhq/detour/cmd/processor/internal/embedded"
	"github.com/detourhq/detour/cmd/processor/internal/metrics"
	"github.com/detourhq/detour/cmd/processor/internal/service"
	"github.com/detourhq/detour/cmd/processor/internal/supervise"
	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/internal/buildinfo"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintln(w, "usage: processor [run] [-demo] [-config FILE]")
	fmt.Fprintln(w, "       processor -version")
	fmt.Fprintln(w, "       processor status [-json] [-config FILE]     one row per provider: state, failures, cooldown, trips, last error")
	fmt.Fprintln(w, "       processor watch [-json] [-config FILE]      the state of every provider, then outage events as they happen: opened, expired, probe, closed, reset")
	fmt.Fprintln(w, "       processor reset [-config FILE] PROVIDER…   end each provider's cooldown and clear its failures and trips, for every processor")
	fmt.Fprintln(w, "       processor trip PROVIDER -for D -reason TEXT [-config FILE]   an operator's cooldown (maintenance); half-open when it ends")
	fmt.Fprintln(w, "       processor check -samples FILE.jsonl [-chain C] [-config FILE | -demo]   every provider × every sample, exit 1 on a failure")
	fmt.Fprintln(w, "       processor dlq list [-reason R] [-chain C] [-json] | show SEQ [-json]")
	fmt.Fprintln(w, "       processor dlq replay (SEQ…|-all) [-reason R] [-chain C] [-deadline D] [-json] | purge (SEQ…|-all) [-reason R] [-chain C]")
	fmt.Fprintln(w, "       processor cache stats|purge [-chain C] [-json]   the response cache: entries fresh, stale and expired per chain; remove them")
	fmt.Fprintln(w, "\nflags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprintln(w)
	_ = config.PrintUsage(w)
	fmt.Fprintln(w, "\nreference: docs/README.md (settings and the chain file: docs/settings.md; commands and exit codes: docs/commands.md)")
}

// commands are the subcommands besides run.
var commands = map[string]func(args []string, stdout, stderr io.Writer) int{
	"dlq": runDLQ, "status": runStatus, "watch": runWatch, "reset": runReset, "trip": runTrip, "check": runCheck, "cache": runCache,
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && commands[args[0]] != nil {
		return commands[args[0]](args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "run" {
		args = args[1:]
	}
	fs := flag.NewFlagSet("processor", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	demoMode := fs.Bool("demo", false, "embedded NATS with local fake providers (primary down for its first minute) and a rules fallback")
	configPath := fs.String("config", "", "chain file (default $DETOUR_CONFIG, else detour.yaml)")
	version := fs.Bool("version", false, "print the version of this build and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout, fs)
			return 0
		}
		fmt.Fprintf(stderr, "processor: %v\n", err)
		usage(stderr, fs)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "processor: unknown command %q\n", fs.Arg(0))
		usage(stderr, fs)
		return 2
	}
	if *version {
		fmt.Fprintln(stdout, "processor", buildinfo.Read())
		return 0
	}
	settings, err := config.LoadSettings()
	if err != nil {
		fmt.Fprintf(stderr, "processor: %v\n", err)
		return config.ExitConfig
	}
	logger := newLogger(settings, stderr)
	if err := serve(settings, *demoMode, *configPath, logger); err != nil {
		if errors.Is(err, config.ErrInvalid) {
			return reportConfig(stderr, logger, settings, err)
		}
		logger.Error("processor stopped", "err", err)
		return 1
	}
	return 0
}

// dataDirVariable, when set, keeps the demo's store.
const dataDirVariable = "DETOUR_DATA_DIR"

// describeChains is a chain file's chains for the start-up log:
// "default: primary, backup, template; cached: local, template (cache 10m0s, stale 24h0m0s)".
func describeChains(file *config.File) string {
	var parts []string
	for _, name := range file.ChainNames() {
		part := name + ": " + strings.Join(file.Chains[name], ", ")
		if c := file.Cache(name); c.On() {
			part += fmt.Sprintf(" (cache %s, stale %s)", c.TTL, c.StaleTTL)
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}

func newLogger(s config.Settings, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: s.SlogLevel()}
	if s.LogFormat == config.LogFormatJSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func serve(settings config.Settings, demoMode bool, configPath string, logger *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var file *config.File
	if !demoMode {
		path := config.ChainFile(configPath)
		var err error
		if file, err = config.Load(path); err != nil {
			return err
		}
		logger.Info("chain file read", "path", path, "chains", describeChains(file))
	}
	if demoMode && settings.NATSURL != "" {
		logger.Warn("demo mode ignores DETOUR_NATS_URL and runs an embedded server")
		settings.NATSURL = ""
	}
	// A busy DETOUR_LISTEN or DETOUR_METRICS_ADDR fails here, before a store
	// is created or the shared streams are touched.
	if settings.NATSURL == "" {
		if err := listenError(settings.Listen, embedded.CheckListen(settings.Listen)); err != nil {
			return err
		}
	}
	var metricsListener net.Listener
	if settings.MetricsAddr != "" {
		var err error
		if metricsListener, err = net.Listen("tcp", settings.MetricsAddr); err != nil {
			return fmt.Errorf("metrics: listening on %s: %w (set DETOUR_METRICS_ADDR to a free host:port, or empty to serve no metrics)", settings.MetricsAddr, err)
		}
		defer metricsListener.Close() // unless served: Serve closes it
	}
	dataDir := settings.DataDir
	if demoMode {
		d, err := demo.Start(time.Now())
		if err != nil {
			return err
		}
		defer d.Close()
		file = d.File
		if _, set := os.LookupEnv(dataDirVariable); set {
			logger.Info("demo: keeping its store in DETOUR_DATA_DIR", "data_dir", dataDir)
		} else {
			if dataDir, err = os.MkdirTemp("", "detour-demo-"); err != nil {
				return err
			}
			defer os.RemoveAll(dataDir)
			logger.Info("demo: a temporary store, deleted on exit (set DETOUR_DATA_DIR to keep it)", "data_dir", dataDir)
		}
		logger.Info("demo: primary is down for its first minute, then healthy", "primary", d.Primary.URL, "backup", d.Backup.URL,
			"chains", describeChains(file))
	}

	m := metrics.New()
	m.SetLogger(logger)
	var p *service.Processor
	conn, err := dial(ctx, settings, dataDir, "detour-processor", logger)
	if err == nil {
		defer conn.Close()
		logger.Info("connected to NATS", "url", conn.URL())
		p, err = service.New(ctx, service.Options{Settings: settings, File: file, Conn: conn.NATS(), Logger: logger, Metrics: m})
	}
	if err != nil && ctx.Err() != nil { // a stop, not a failure
		logger.Info("stopped during start-up", "cause", context.Cause(ctx))
		return nil
	}
	if err != nil {
		return err
	}
	// The metrics server outlives the processor, so /readyz says not ready
	// while it drains. A connection closed for good stops it with an error,
	// for its supervisor to restart it.
	var outside, inside []supervise.Part
	if metricsListener != nil {
		outside = append(outside, func(ctx context.Context) error {
			if err := metrics.Serve(ctx, metricsListener, p.Handler()); err != nil {
				logger.Warn("metrics server", "err", err)
			}
			return nil
		})
		logger.Info("serving the status page on /, and /metrics, /healthz and /readyz", "addr", settings.MetricsAddr)
	}
	inside = append(inside, p.Run, func(ctx context.Context) error {
		select {
		case err := <-conn.Lost():
			return err
		case <-ctx.Done():
			return nil
		}
	})
	if demoMode {
		inside = append(inside, func(ctx context.Context) error { _ = demo.Trickle(ctx, conn.NATS(), 2*time.Second, logger); return nil })
		logger.Info("demo: try `go run ./cmd/publisher \"hello\"` in another terminal")
	}
	return supervise.Run(ctx, outside, inside)
}
