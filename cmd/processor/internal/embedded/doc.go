// Package embedded starts the NATS server with JetStream that a processor
// runs inside itself when no DETOUR_NATS_URL is set (the demo, a single
// machine): CheckListen sees at once whether its address is free, and Start
// waits until the server takes connections.
package embedded
