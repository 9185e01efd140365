package text

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Visible returns s with every character a terminal would act on rather
// than show written as an escape, the way strconv.Quote writes it (\x1b,
// \n, \t, \u0085, \u202e) but without quotes around the whole: controls
// (C0, DEL, C1), and format characters such as the bidi overrides, which
// reorder what is shown around them; see escaped. A byte that is not UTF-8
// is written \xNN.
//
// Every text of outside origin a command prints for a person (a provider's
// error, a request id or header, a name read from a bucket or a fleet
// announcement) goes through Visible first: without it such text could
// clear the screen, set the window title, write the clipboard (OSC 52),
// hide or overwrite what follows, or forge a row of a table. A backslash is
// left as it is, so text that spells an escape reads the same as the
// escape; what matters is that nothing reaches the terminal raw.
func Visible(s string) string { return visible(s, false) }

// VisibleLines is Visible for text of several lines meant to be read as
// such (a dead letter's text body, an answer's content): line feeds and
// tabs stay as they are, everything else Visible escapes is escaped.
func VisibleLines(s string) string { return visible(s, true) }

func visible(s string, lines bool) string {
	i := firstToEscape(s, lines)
	if i == len(s) {
		return s // the common case: nothing to escape, nothing copied
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i < len(s) {
		_, size := utf8.DecodeRuneInString(s[i:])
		q := strconv.Quote(s[i : i+size]) // "\x1b", "\n", "\u202e", "\xff"
		b.WriteString(s[:i])
		b.WriteString(q[1 : len(q)-1])
		s = s[i+size:]
		i = firstToEscape(s, lines)
	}
	b.WriteString(s)
	return b.String()
}

// firstToEscape is the index of the first byte of s that visible writes as
// an escape, len(s) when there is none.
func firstToEscape(s string, lines bool) int {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || escaped(r, lines) {
			return i
		}
		i += size
	}
	return len(s)
}

// escaped reports whether visible writes r as an escape: what is not a
// letter, mark, number, punctuation, symbol or space (unicode.IsGraphic),
// that is controls (C0, DEL, C1), format characters (the bidi overrides,
// isolates and marks among them), line and paragraph separators, and
// surrogates, private-use and unassigned code points.
func escaped(r rune, lines bool) bool {
	if lines && (r == '\n' || r == '\t') {
		return false
	}
	return !unicode.IsGraphic(r)
}

// VisibleError is err's text for a terminal: VisibleLines, so that the
// lines of errors joined with errors.Join stay lines. An error may quote a
// name or value from outside (a request's id, a bucket key, what a server
// or provider said); none that detour quotes holds a line feed of its own
// (a NATS subject or header value cannot).
func VisibleError(err error) string { return VisibleLines(err.Error()) }
