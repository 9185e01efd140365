package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/cmd/processor/internal/embedded"
	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/internal/text"
	"github.com/detourhq/detour/natsconn"
)

// dial connects to DETOUR_NATS_URL, or to an embedded server it starts on
// DETOUR_LISTEN with its store in dataDir, which closing the connection
// stops; ctx ending while it starts stops it with ctx's error.
func dial(ctx context.Context, s config.Settings, dataDir, name string, logger *slog.Logger) (*natsconn.Conn, error) {
	if s.NATSURL != "" {
		return natsconn.Dial(s, name, logger)
	}
	srv, err := embedded.Start(ctx, s.Listen, dataDir)
	if err != nil {
		return nil, listenError(s.Listen, err)
	}
	logger.Info("embedded NATS server started", "listen", s.Listen, "data_dir", dataDir)
	return natsconn.DialInProcess(srv, name, logger)
}

// listenError says what to do about a busy DETOUR_LISTEN.
func listenError(listen string, err error) error {
	if errors.Is(err, embedded.ErrListenInUse) {
		return fmt.Errorf("embedded NATS server: %s: %w (by another processor or NATS server?); "+
			"set DETOUR_LISTEN to a free host:port, or DETOUR_NATS_URL to use the server there", listen, embedded.ErrListenInUse)
	}
	return err
}

// connectClient connects a client command to DETOUR_NATS_URL or, when it is
// empty, to a local processor's embedded server on DETOUR_LISTEN.
func connectClient(name string) (*nats.Conn, jetstream.JetStream, error) {
	settings, err := config.LoadSettings()
	if err != nil {
		return nil, nil, err
	}
	nc, err := natsconn.ConnectClient(settings, name)
	if err != nil {
		return nil, nil, err
	}
	js, _ := jetstream.New(nc) // fails only on bad options
	return nc, js, nil
}

// withClient runs do on a client connection named name until an interrupt,
// and returns its exit code; what names the command in the error of a
// connection that failed.
func withClient(what, name string, stderr io.Writer, do func(context.Context, jetstream.JetStream) int) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	nc, js, err := connectClient(name)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %s\n", what, text.VisibleError(err))
		return exitCode(err)
	}
	defer nc.Close()
	return do(ctx, js)
}

// usageExit is the exit of a command whose flags or arguments err refused:
// for -help, help on stdout and 0; else the error and usage on stderr, and 2.
func usageExit(fs *flag.FlagSet, err error, help, usage string, stdout, stderr io.Writer) int {
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, help)
		return 0
	}
	fmt.Fprintf(stderr, "%s: %v\n%s", fs.Name(), err, usage)
	return 2
}
