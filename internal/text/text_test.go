package text

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		in    string
		limit int
		want  string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"abcdefghijk", 5, "abcde…"},
		{"ab天气", 3, "ab…"}, // 天 is 3 bytes: the cut steps back to its start
		{"", 0, ""},
	} {
		if got := Cut(tc.in, tc.limit); got != tc.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", tc.in, tc.limit, got, tc.want)
		}
	}
	long := strings.Repeat("天气", 200)
	if got := Cut(long, 300); !utf8.ValidString(got) || len(got) > 300+len("…") {
		t.Errorf("Cut of a long non-ASCII text: %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
}

func TestURLHidesWhatMayBeASecret(t *testing.T) {
	for raw, want := range map[string]string{
		"https://api.openai.com/v1":                         "https://api.openai.com/v1",
		"https://TOKEN@h/v1":                                "https://xxxxx@h/v1",
		"http://u:pw@h:8080/v1?api-version=2024&key=SECRET": "http://xxxxx@h:8080/v1?api-version=xxxxx&key=xxxxx",
		"http://h/v1#frag":                                  "http://h/v1",
		"not a url with a secret":                           "(unreadable URL)",
		"http://[::1":                                       "(unreadable URL)",
	} {
		if got := URL(raw); got != want {
			t.Errorf("URL(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestUnicodeEscapeReadsOneCharacter(t *testing.T) {
	for _, tt := range []struct {
		s    string
		r    rune
		size int
	}{
		{`\u0041x`, 'A', 6},
		{`\u00e9`, 'é', 6},
		{`\uD83D\uDE00`, '😀', 12},
		{`\ud800`, -1, 6},
		{`\ud800\u0041`, -1, 6},
		{`\udc00\ud800`, -1, 6},
		{`\u12`, 0, 0},
		{`\u12g4`, 0, 0},
		{`\n`, 0, 0},
		{`u0041`, 0, 0},
	} {
		if r, size := UnicodeEscape(tt.s, 0); r != tt.r || size != tt.size {
			t.Errorf("%s: %q, %d; want %q, %d", tt.s, r, size, tt.r, tt.size)
		}
		if r, size := UnicodeEscape([]byte(tt.s), 0); r != tt.r || size != tt.size {
			t.Errorf("%s as bytes: %q, %d; want %q, %d", tt.s, r, size, tt.r, tt.size)
		}
	}
}
