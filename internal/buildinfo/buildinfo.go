// Package buildinfo reports what the Go toolchain recorded about the build
// of the running binary: the module version and, when the build was made
// from a version-control checkout, the revision and whether the checkout
// had changes. Both commands print it for -version.
package buildinfo

import (
	"cmp"
	"regexp"
	"runtime/debug"
	"strings"
)

// DevVersion is Semver's answer when the build names no semantic version
// (a `go run` or `go build` from a checkout, a test binary).
const DevVersion = "0.0.0-dev"

// semver is the NATS micro rule for a service version: Semantic Versioning
// 2.0.0 (https://semver.org), without a leading "v".
var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// Info is what a build recorded about itself.
type Info struct {
	// Version is the main module's version: a release tag, a
	// pseudo-version, or "(devel)" for a build from a checkout that the
	// toolchain did not stamp.
	Version string
	// Revision is the vcs.revision setting, "" when not recorded (go run,
	// -buildvcs=false, a build outside a checkout).
	Revision string
	// Modified is the vcs.modified setting: the checkout had uncommitted
	// changes.
	Modified bool
	// GoVersion is the toolchain that built the binary.
	GoVersion string
}

// Read returns the running binary's Info; without build information (a
// binary built without module support) its Version is "unknown".
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	return From(bi, ok)
}

// From returns the Info of bi; ok false (ReadBuildInfo found none) gives
// Version "unknown".
func From(bi *debug.BuildInfo, ok bool) Info {
	if !ok || bi == nil {
		return Info{Version: "unknown"}
	}
	info := Info{Version: cmp.Or(bi.Main.Version, "(devel)"), GoVersion: bi.GoVersion}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// String is one line for -version: the version, then the revision and
// "modified" when recorded, then the toolchain, as in
// "v1.2.0, revision 3a33ee3…, modified, go1.26.8".
func (i Info) String() string {
	parts := []string{i.Version}
	if i.Revision != "" {
		parts = append(parts, "revision "+i.Revision)
		if i.Modified {
			parts = append(parts, "modified")
		}
	}
	if i.GoVersion != "" {
		parts = append(parts, i.GoVersion)
	}
	return strings.Join(parts, ", ")
}

// Semver is Version as a semantic version without its "v" (v1.2.3 gives
// 1.2.3; a pseudo-version such as v0.0.0-20260101120000-abcdef123456 keeps
// its suffix), as a NATS micro service must give; DevVersion when Version
// is none ("(devel)", "unknown").
func (i Info) Semver() string {
	v := strings.TrimPrefix(i.Version, "v")
	if !semver.MatchString(v) {
		return DevVersion
	}
	return v
}
