// Package config owns everything detour reads from outside before it starts:
// the DETOUR_* environment settings ([Settings], loaded with envconfig) and the
// YAML chain file ([File]) that names the providers and the chains that order them.
//
// It resolves provider API keys from the variables the chain file names, applies
// the documented defaults, and validates everything up front so a bad setting
// fails at start with an error that names the variable, provider or chain at
// fault. It knows nothing of NATS or HTTP: other packages receive plain values.
package config
