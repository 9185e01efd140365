// Package wait holds the waiting that the retry loops and the load
// generators share: the one context-aware sleep of chain, stream and the
// client's retries, and the Pacer that spaces the publishes of the client's
// batches and of the bench at a fixed rate.
package wait
