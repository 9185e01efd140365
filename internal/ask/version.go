package ask

import (
	"regexp"
	"runtime/debug"
	"strings"
)

// DevVersion is the service's version when the build names none that is
// semantic (a `go run` or `go build` from a checkout, a test binary).
const DevVersion = "0.0.0-dev"

// semver is micro's rule for a version: semantic versioning 2.0, no "v".
var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// BuildVersion is the main module's version as the build recorded it
// (v1.2.3, or a pseudo-version such as v0.0.0-20260101120000-abcdef123456),
// without its "v"; DevVersion when the build recorded none ("(devel)").
func BuildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return DevVersion
	}
	return semverOf(info.Main.Version)
}

// semverOf turns a module version into a semantic one, DevVersion when it
// is none.
func semverOf(v string) string {
	v = strings.TrimPrefix(v, "v")
	if !semver.MatchString(v) {
		return DevVersion
	}
	return v
}
