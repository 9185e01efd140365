package main

import (
	"os/exec"
	"regexp"
	"runtime"
	"testing"
)

// TestVersionFlag: `processor -version` and `publisher -version` print the
// build's version and toolchain on one line and exit 0, whatever else the
// command line or the environment holds.
func TestVersionFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("builds both binaries")
	}
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"processor", []string{"-version"}},
		{"processor", []string{"run", "-version"}},
		{"processor", []string{"-demo", "-version"}},
		{"publisher", []string{"-version"}},
		{"publisher", []string{"-n", "3", "-version"}},
	} {
		bin := buildCommand(t, tt.name)
		cmd := exec.Command(bin, tt.args...)
		// A setting that would stop either command: -version reads none.
		cmd.Env = []string{"DETOUR_WORKERS=abc"}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", tt.name, tt.args, err, out)
		}
		want := regexp.MustCompile(`^` + tt.name + ` \S.*, ` + regexp.QuoteMeta(runtime.Version()) + "\n$")
		if !want.Match(out) {
			t.Errorf("%s %v printed %q; want a match of %s", tt.name, tt.args, out, want)
		}
	}
}
