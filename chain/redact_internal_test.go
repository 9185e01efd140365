package chain

import (
	"strings"
	"testing"
)

// TestRedactKeyFindsEveryEscapedSpelling: the key spelled with \u escapes
// and \/, whole or in part, is found, whatever surrounds it, including a
// half surrogate pair put before it to swallow its first escape.
func TestRedactKeyFindsEveryEscapedSpelling(t *testing.T) {
	const key = "sk-a/bc"
	for _, text := range []string{
		`sk-a\/bc`,
		`\u0073k\u002da\/bc`,
		`"\ud800\u0073k-a/bc"`,
		`\udc00\u0073k-a\/bc`,
		`\ud83d\ude00 sk\u002da/bc`,
	} {
		got := redactKey(text, key)
		if got == text || containsKey(got, key) {
			t.Errorf("%s: redacted to %s", text, got)
		}
	}
	// An escaped backslash before u0073 spells a backslash and "u0073":
	// no key, and the text stays as written.
	for _, text := range []string{`no key \u0041 here`, `\\u0073k-a/bc`} {
		if got := redactKey(text, key); got != text {
			t.Errorf("a text without the key changed: %s to %s", text, got)
		}
	}
}

// containsKey reports the key in text, plain or escaped.
func containsKey(text, key string) bool {
	return strings.Contains(text, key) || strings.Contains(unescape(text), key)
}
