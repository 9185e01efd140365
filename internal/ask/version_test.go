package ask

import "testing"

func TestSemverOf(t *testing.T) {
	for in, want := range map[string]string{
		"":                                   DevVersion,
		"(devel)":                            DevVersion,
		"v1.2.3":                             "1.2.3",
		"v0.0.0-20260101120000-abcdef123456": "0.0.0-20260101120000-abcdef123456",
		"v1.4.0-rc.1+dirty":                  "1.4.0-rc.1+dirty",
		"v0.0.0-20260101120000-abcdef123456+dirty": "0.0.0-20260101120000-abcdef123456+dirty",
		"v2": DevVersion,
	} {
		if got := semverOf(in); got != want {
			t.Errorf("semverOf(%q) = %q, want %q", in, got, want)
		}
	}
	if v := BuildVersion(); !semver.MatchString(v) {
		t.Errorf("BuildVersion() = %q, not semantic", v)
	}
}
