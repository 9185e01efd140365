package text

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestVisible(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"plain text is unchanged", "primary: HTTP 503 (über-busy) 天气", "primary: HTTP 503 (über-busy) 天气"},
		{"empty", "", ""},
		{"escape sequence", "x\x1b[2J", `x\x1b[2J`},
		{"window title", "\x1b]0;owned\a", `\x1b]0;owned\a`},
		{"clipboard write", "r\x1b]52;c;cHduZWQ=\x07", `r\x1b]52;c;cHduZWQ=\a`},
		{"hidden text", "fine\x1b[8m hidden \x1b[0m", `fine\x1b[8m hidden \x1b[0m`},
		{"carriage return", "ok\r\x1b[Kforged", `ok\r\x1b[Kforged`},
		{"line feed forging a row", "x\n999  poison  FORGED", `x\n999  poison  FORGED`},
		{"tab", "a\tb", `a\tb`},
		{"other C0", "\x00\b\f\v\x1f", `\x00\b\f\v\x1f`},
		{"DEL", "a\x7fb", `a\x7fb`},
		{"C1 CSI and OSC", "a\u009b2Jb\u009d0;t\u009c", `a\u009b2Jb\u009d0;t\u009c`},
		{"C1 bounds", "\u0080\u009f\u00a0", `\u0080\u009f` + "\u00a0"},
		{"bidi override", "abc\u202edcba", `abc\u202edcba`},
		{"bidi embeddings and isolates", "\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069", `\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069`},
		{"bidi marks", "a\u200eb\u200fc\u061cd", `a\u200eb\u200fc\u061cd`},
		{"line and paragraph separators", "a\u2028b\u2029c", `a\u2028b\u2029c`},
		{"other format characters", "\u200b\ufeff\u206a", `\u200b\ufeff\u206a`},
		{"spaces stay", "a\u00a0b\u3000c", "a\u00a0b\u3000c"},
		{"invalid UTF-8", "a\xff\xc3b", `a\xff\xc3b`},
		{"a backslash stays", `C:\tmp`, `C:\tmp`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Visible(tc.in); got != tc.want {
				t.Errorf("Visible(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestVisibleLinesKeepsLineFeedsAndTabs(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"one\n\ttwo\n", "one\n\ttwo\n"},
		{"a\r\nb\x1b[2J\n\u202ec", `a\r` + "\n" + `b\x1b[2J` + "\n" + `\u202ec`},
		{"\u0085\v\xfe", `\u0085\v\xfe`},
	} {
		if got := VisibleLines(tc.in); got != tc.want {
			t.Errorf("VisibleLines(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestVisibleEscapesAsQuoteDoes: each character Visible escapes is written
// as strconv.Quote writes it.
func TestVisibleEscapesAsQuoteDoes(t *testing.T) {
	var in []string
	for r := rune(0); r < 0x20; r++ {
		in = append(in, string(r))
	}
	for r := rune(0x7f); r <= 0x9f; r++ {
		in = append(in, string(r))
	}
	for _, r := range []rune{0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069} {
		in = append(in, string(r))
	}
	in = append(in, "\xff", "\xe2\x80") // not UTF-8; the second a cut-off character
	for _, s := range in {
		want := strings.Trim(strconv.Quote(s), `"`)
		if got := Visible(s); got != want {
			t.Errorf("Visible(%q) = %s, want %s", s, got, want)
		}
	}
}

func TestVisibleDoesNotCopyPlainText(t *testing.T) {
	s := strings.Repeat("plain ", 100)
	if n := testing.AllocsPerRun(10, func() { _ = Visible(s) }); n != 0 {
		t.Errorf("Visible of plain text allocated %v times", n)
	}
}

// FuzzVisible: what Visible returns is valid UTF-8 with nothing a terminal
// acts on, and text with nothing to escape comes back unchanged.
func FuzzVisible(f *testing.F) {
	for _, s := range []string{"", "plain", "x\x1b]0;t\a\n", "\u202e\u0085\xff", "a\tb\r"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Visible(s)
		if !utf8.ValidString(got) {
			t.Fatalf("Visible(%q) = %q: not UTF-8", s, got)
		}
		for _, r := range got {
			if escaped(r, false) {
				t.Fatalf("Visible(%q) = %q holds %U", s, got, r)
			}
		}
		if firstToEscape(s, false) == len(s) && got != s {
			t.Fatalf("Visible(%q) = %q, want it unchanged", s, got)
		}
		lines := VisibleLines(s)
		for _, r := range lines {
			if escaped(r, true) {
				t.Fatalf("VisibleLines(%q) = %q holds %U", s, lines, r)
			}
		}
	})
}

// TestVisibleError: joined errors keep their lines; what a terminal would
// act on inside them is escaped.
func TestVisibleError(t *testing.T) {
	err := errors.Join(errors.New("bad id \"x\x1b[2J\""), errors.New("and \u202eso on"))
	if got, want := VisibleError(err), "bad id \"x\\x1b[2J\"\nand \\u202eso on"; got != want {
		t.Fatalf("VisibleError = %q, want %q", got, want)
	}
}
