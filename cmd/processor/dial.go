package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/detourhq/detour/cmd/processor/internal/embedded"
	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/natsconn"
)

// dial connects the processor as the settings say: to DETOUR_NATS_URL, or
// to an embedded server it starts on DETOUR_LISTEN with its store in
// dataDir. Either way the client reconnects without limit, and disconnects
// and reconnects are logged. Closing the connection stops the embedded
// server, if any. A stop signal (ctx ending) while the embedded server
// starts stops it and returns ctx's error.
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

// checkListen fails at once, before anything is created, when the embedded
// server could not listen on DETOUR_LISTEN.
func checkListen(s config.Settings) error {
	if s.NATSURL != "" {
		return nil
	}
	return listenError(s.Listen, embedded.CheckListen(s.Listen))
}

// listenError says what to do about a busy DETOUR_LISTEN.
func listenError(listen string, err error) error {
	if errors.Is(err, embedded.ErrListenInUse) {
		return fmt.Errorf("embedded NATS server: %s: %w (by another processor or NATS server?); "+
			"set DETOUR_LISTEN to a free host:port, or DETOUR_NATS_URL to use the server there", listen, embedded.ErrListenInUse)
	}
	return err
}
