package main

import (
	"testing"

	"github.com/detourhq/detour/config"
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
