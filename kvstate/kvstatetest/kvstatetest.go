// Package kvstatetest runs a provider-state mirror for tests the way a
// processor's run group does.
package kvstatetest

import (
	"context"
	"testing"

	"github.com/detourhq/detour/kvstate"
)

// Follow loads s and keeps it following the bucket until the test ends; the
// cleanup stops it and waits for its Run to return.
func Follow(t testing.TB, ctx context.Context, s *kvstate.Store) {
	t.Helper()
	if err := s.Load(ctx); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}
