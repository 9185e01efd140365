// Package client publishes requests to detour and collects their results: it
// is what cmd/publisher runs, kept here so it can be tested against a real
// server. Results arrive on a private inbox; any that the inbox missed (the
// client subscribed late, or a reply was lost) are read back from
// DETOUR_RESULTS, where every result is stored.
package client
