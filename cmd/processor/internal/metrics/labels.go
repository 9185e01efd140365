package metrics

import (
	"strings"
	"unicode/utf8"

	"github.com/samber/lo"

	"github.com/detourhq/detour/internal/text"
)

// list joins label values for a help text: "a, b, c".
func list[T ~string](values []T) string {
	return strings.Join(lo.Map(values, func(v T, _ int) string { return string(v) }), ", ")
}

// maxLabelLen bounds a label value from outside, in bytes: a model name
// of a megabyte would be kept in every series it labels.
const maxLabelLen = 128

// labelValue makes s fit to be a label value: the registry panics on one
// that is not UTF-8, which a provider's answer may send, and a panic while
// a delivery is settled would stop the processor.
func labelValue(s string) string {
	if len(s) <= maxLabelLen && utf8.ValidString(s) {
		return s
	}
	return text.Cut(strings.ToValidUTF8(s, "\uFFFD"), maxLabelLen)
}
