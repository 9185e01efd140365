package buildinfo_test

import (
	"runtime/debug"
	"testing"

	"github.com/detourhq/detour/internal/buildinfo"
)

func TestString(t *testing.T) {
	main := func(version string) debug.Module {
		return debug.Module{Path: "github.com/detourhq/detour", Version: version}
	}
	tests := map[string]struct {
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		"no build information": {nil, false, "unknown"},
		"go run": {&debug.BuildInfo{GoVersion: "go1.26.8", Main: main("(devel)")}, true,
			"(devel), go1.26.8"},
		"a release": {&debug.BuildInfo{GoVersion: "go1.26.8", Main: main("v1.2.0")}, true,
			"v1.2.0, go1.26.8"},
		"a clean checkout": {&debug.BuildInfo{GoVersion: "go1.26.8", Main: main("v0.0.0-20260301120000-3a33ee3c0ffe"), Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "3a33ee3c0ffee"}, {Key: "vcs.modified", Value: "false"}}}, true,
			"v0.0.0-20260301120000-3a33ee3c0ffe, revision 3a33ee3c0ffee, go1.26.8"},
		"a checkout with changes": {&debug.BuildInfo{GoVersion: "go1.26.8", Main: main("(devel)"), Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "3a33ee3c0ffee"}, {Key: "vcs.modified", Value: "true"}}}, true,
			"(devel), revision 3a33ee3c0ffee, modified, go1.26.8"},
		"no main version": {&debug.BuildInfo{GoVersion: "go1.26.8"}, true, "(devel), go1.26.8"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := buildinfo.From(tt.bi, tt.ok).String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestRead: a test binary has build information of its own.
func TestRead(t *testing.T) {
	info := buildinfo.Read()
	if info.Version == "" || info.Version == "unknown" || info.GoVersion == "" {
		t.Fatalf("Read() = %+v", info)
	}
}

func TestSemver(t *testing.T) {
	for in, want := range map[string]string{
		"":                                   buildinfo.DevVersion,
		"(devel)":                            buildinfo.DevVersion,
		"unknown":                            buildinfo.DevVersion,
		"v1.2.3":                             "1.2.3",
		"v0.0.0-20260101120000-abcdef123456": "0.0.0-20260101120000-abcdef123456",
		"v1.4.0-rc.1+dirty":                  "1.4.0-rc.1+dirty",
		"v0.0.0-20260101120000-abcdef123456+dirty": "0.0.0-20260101120000-abcdef123456+dirty",
		"v2": buildinfo.DevVersion,
	} {
		if got := (buildinfo.Info{Version: in}).Semver(); got != want {
			t.Errorf("Semver of %q = %q, want %q", in, got, want)
		}
	}
}
