package main

import (
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/natsconn"
)

// connectClient connects a client command (status, watch, dlq) to
// DETOUR_NATS_URL or, when that is empty, to a local processor's embedded
// server on DETOUR_LISTEN.
func connectClient(name string) (*nats.Conn, jetstream.JetStream, error) {
	settings, err := config.LoadSettings()
	if err != nil {
		return nil, nil, err
	}
	nc, err := natsconn.ConnectClient(settings, name)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}
