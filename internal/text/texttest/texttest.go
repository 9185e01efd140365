package texttest

import (
	"strings"
	"testing"

	"github.com/detourhq/detour/internal/text"
)

// AssertVisible fails t when a line of out holds anything text.Visible
// would escape: a terminal would act on it rather than show it.
func AssertVisible(t testing.TB, out string) {
	t.Helper()
	if line, found := RawLine(out); found {
		t.Fatalf("raw control character in %q; output:\n%s", line, out)
	}
}

// RawLine returns the first line of out that holds anything text.Visible
// would escape (a control such as ESC, CR or a tab, a format character
// such as a bidi override, a byte that is not UTF-8), and whether there is
// one.
func RawLine(out string) (string, bool) {
	for line := range strings.SplitSeq(out, "\n") {
		if text.Visible(line) != line {
			return line, true
		}
	}
	return "", false
}
