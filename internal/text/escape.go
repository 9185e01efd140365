package text

import (
	"strconv"
	"unicode/utf16"
)

// UnicodeEscape reads the JSON escape \uXXXX at s[i:] (RFC 8259, section
// 7): the character it spells and the bytes it takes. A surrogate pair of
// two escapes is one character of 12 bytes. A half of a pair alone spells
// no character: r is then -1 and size 6 (encoding/json reads it as
// U+FFFD). size is 0 when no \u escape starts at s[i:].
func UnicodeEscape[T ~string | ~[]byte](s T, i int) (r rune, size int) {
	u := codeUnit(s, i)
	switch {
	case u < 0:
		return 0, 0
	case u >= 0xd800 && u < 0xdc00: // a high surrogate: a low one must follow
		if lo := codeUnit(s, i+6); lo >= 0xdc00 && lo < 0xe000 {
			return utf16.DecodeRune(rune(u), rune(lo)), 12
		}
		return -1, 6
	case u >= 0xdc00 && u < 0xe000:
		return -1, 6
	}
	return rune(u), 6
}

// codeUnit is the UTF-16 code unit of the escape \uXXXX at s[i:], -1 when
// there is none.
func codeUnit[T ~string | ~[]byte](s T, i int) int {
	if i+6 > len(s) || s[i] != '\\' || s[i+1] != 'u' {
		return -1
	}
	n, err := strconv.ParseUint(string(s[i+2:i+6]), 16, 16)
	if err != nil {
		return -1
	}
	return int(n)
}
