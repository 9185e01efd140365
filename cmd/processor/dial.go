package main

import (
	"log/slog"

	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/natsconn"
	"github.com/detourhq/detour/stream"
)

// dial connects the processor as the settings say: to DETOUR_NATS_URL, or
// to an embedded server it starts on DETOUR_LISTEN with its store in
// dataDir. Either way the client reconnects without limit, and disconnects
// and reconnects are logged. Closing the connection stops the embedded
// server, if any.
func dial(s config.Settings, dataDir, name string, logger *slog.Logger) (*natsconn.Conn, error) {
	if s.NATSURL != "" {
		return natsconn.Dial(s, name, logger)
	}
	srv, err := stream.StartEmbedded(s.Listen, dataDir)
	if err != nil {
		return nil, err
	}
	logger.Info("embedded NATS server started", "listen", s.Listen, "data_dir", dataDir)
	return natsconn.DialInProcess(srv, name, logger)
}
