package config

import (
	"bytes"
	"fmt"
	"unicode/utf8"
)

// This file holds what decode checks of a chain file before the YAML
// parser reads it: that it is text.

// notText finds the first character the YAML parser refuses without a
// place: a byte that does not begin a valid UTF-8 sequence, or a control
// character other than tab and line breaks (YAML 1.2, section 5.1, allows
// only printable characters). It gives its line and says what it is and in
// which column (1-based, in bytes).
func notText(data []byte) (line int, what string, found bool) {
	if bytes.HasPrefix(data, []byte{0xfe, 0xff}) || bytes.HasPrefix(data, []byte{0xff, 0xfe}) {
		return 0, "", false // UTF-16, which a byte order mark announces, is the parser's to read
	}
	line, start := 1, 0
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			return line, fmt.Sprintf("the file is not UTF-8 text (byte %#x in column %d)", data[i], i-start+1), true
		case r == '\n', r == '\r' && (i+1 == len(data) || data[i+1] != '\n'), r == 0x85, r == 0x2028, r == 0x2029:
			// The line breaks of the YAML reader: a CR LF counts once, at its LF.
			line, start = line+1, i+size
		case r == '\t' || r == '\r':
		case r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == 0xfffe || r == 0xffff:
			return line, fmt.Sprintf("control character %U in column %d (only tabs and line breaks are allowed)", r, i-start+1), true
		}
		i += size
	}
	return 0, "", false
}
