package text

import "unicode/utf8"

// Cut returns s cut to at most limit bytes plus "…" when it is longer. The
// cut falls on a rune boundary, so the result stays valid UTF-8.
func Cut(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
