package main

import (
	"bytes"
	"testing"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/internal/publisher"
)

// TestBadSettingsExit78: a bad DETOUR_* setting stops the publisher with
// exit code 78 (a bad flag stays 2), naming each bad variable on a line.
func TestBadSettingsExit78(t *testing.T) {
	t.Setenv("DETOUR_WORKERS", "abc")
	t.Setenv("DETOUR_ACK_WAIT", "30")
	code, stdout, stderr := runPublisher(t, "hello")
	const want = "publisher: 2 settings refused:\n" +
		"  DETOUR_WORKERS: \"abc\" is not a whole number\n" +
		"  DETOUR_ACK_WAIT: \"30\" is not a duration: give a unit, such as 30s\n"
	if code != config.ExitConfig || stdout != "" || stderr != want {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 78 and:\n%s", code, stderr, want)
	}
	if code, _, _ := runPublisher(t, "-bogus", "hello"); code != 2 {
		t.Errorf("bad flag: exit %d, want 2", code)
	}
}

// TestPrintOutcomes: a single result prints as a block; a failed one has no
// model or provider, and leaves them out instead of printing them empty.
func TestPrintOutcomes(t *testing.T) {
	var out bytes.Buffer
	printOutcomes(&out, []publisher.Outcome{
		{ID: "q1", Result: chain.Result{ID: "q1", Status: chain.StatusOK, Content: "Hello.", Model: "gpt-4o", Provider: "primary",
			Attempts: []chain.Attempt{{}}, LatencyMs: 412}},
		{ID: "q2", Result: chain.Result{ID: "q2", Status: chain.StatusFailed, Error: "every provider failed",
			Attempts: []chain.Attempt{{}, {}}, LatencyMs: 12}},
		{ID: "q3", Err: publisher.ErrNoResult},
	})
	want := "q1  ok  model=gpt-4o provider=primary degraded=false attempts=1 latency=412ms\n" +
		"  Hello.\n" +
		"q2  failed  degraded=false attempts=2 latency=12ms\n" +
		"  error: every provider failed\n" +
		"q3  no result: " + publisher.ErrNoResult.Error() + "\n"
	if out.String() != want {
		t.Errorf("printed:\n%s\nwant:\n%s", out.String(), want)
	}
}
