package logs_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/detourhq/detour/internal/logs"
)

func TestOrDiscardKeepsAGivenLogger(t *testing.T) {
	var out bytes.Buffer
	l := slog.New(slog.NewTextHandler(&out, nil))

	if got := logs.OrDiscard(l); got != l {
		t.Fatalf("OrDiscard(l) = %p, want l itself (%p)", got, l)
	}
}

func TestOrDiscardOfNilDropsEverything(t *testing.T) {
	l := logs.OrDiscard(nil)

	if l == nil {
		t.Fatal("OrDiscard(nil) = nil, want a logger")
	}
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError} {
		if l.Enabled(context.Background(), level) {
			t.Errorf("OrDiscard(nil) is enabled at %v, want every level dropped", level)
		}
	}
	l.Error("dropped", "k", "v") // must not panic
}
