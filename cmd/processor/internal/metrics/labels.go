package metrics

import (
	"strings"
	"unicode/utf8"

	"github.com/detourhq/detour/internal/text"
)

// list joins label values for a help text: "a, b, c".
func list[T ~string](values []T) string {
	s := make([]string, len(values))
	for i, v := range values {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}

// maxLabelLen bounds a label value taken from outside data, in bytes. A
// model name comes from a provider's answer, and one of a megabyte would be
// kept in every series it labels.
const maxLabelLen = 128

// labelValue makes s fit to be a label value. The registry panics on a
// value that is not valid UTF-8, and chain, provider and model names reach
// the labels from outside (the chain file, a provider's answer): a panic
// while a delivery is settled would stop the processor, so bytes that are
// not UTF-8 become U+FFFD, and a value past maxLabelLen is cut (text.Cut).
func labelValue(s string) string {
	if len(s) <= maxLabelLen && utf8.ValidString(s) {
		return s
	}
	return text.Cut(strings.ToValidUTF8(s, "\uFFFD"), maxLabelLen)
}
