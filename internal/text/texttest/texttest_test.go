package texttest

import "testing"

// recorder is a testing.TB that notes a failure instead of ending the test.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Fatalf(string, ...any) { r.failed = true }

// TestAssertVisibleFailsOnWhatATerminalActsOn: output with a raw control,
// a bidi override, a tab or a byte that is not UTF-8 fails the check;
// escapes of them, and lines themselves, pass.
func TestAssertVisibleFailsOnWhatATerminalActsOn(t *testing.T) {
	for _, out := range []string{"a\x1b[2Jb", "row\rforged", "a\tb", "evil\u202etxt", "bad \xff byte", "ok\nbell\a"} {
		r := &recorder{TB: t}
		AssertVisible(r, out)
		if !r.failed {
			t.Errorf("%q passed", out)
		}
	}
	for _, out := range []string{"", "plain\nlines\n", `a\x1b[2Jb`, `evil\u202etxt`, "héllo ✓"} {
		r := &recorder{TB: t}
		AssertVisible(r, out)
		if r.failed {
			t.Errorf("%q failed", out)
		}
	}
}
