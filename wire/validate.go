package wire

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/internal/text"
)

// Limits on the outside values that become subjects, headers and log
// fields, checked when a request is decoded, before anything is published.
const (
	// MaxIDLen is the longest request id, in bytes. An id is a subject
	// token (detour.results.<id>), a Nats-Msg-Id and a log field.
	MaxIDLen = 128
	// MaxReplySubjectLen is the longest reply subject, in bytes. A NATS
	// server drops a connection whose protocol line passes its
	// max_control_line (4 KiB by default), and the client closes for good:
	// one request could knock a processor off NATS. 256 leaves the line
	// room, and is well above any client library's inbox.
	MaxReplySubjectLen = 256
	// MaxReplySubjectTokens is the most '.'-separated tokens a reply
	// subject may have; no inbox needs more than a handful.
	MaxReplySubjectTokens = 16
	// MaxMaxTokens is the largest max_tokens, above any model's output
	// limit: a larger value is refused before a provider is paid to say so.
	MaxMaxTokens = 1_000_000
	// MaxMetadataKeys is the most keys metadata may hold, MaxMetadataKeyLen
	// and MaxMetadataValueLen the longest key and value (a string, or a
	// number's text) in bytes: metadata is echoed in a result that must fit
	// the server; it labels a request, it carries no documents.
	MaxMetadataKeys     = 64
	MaxMetadataKeyLen   = 256
	MaxMetadataValueLen = 4096
)

// quoteLimit is how much of an outside value an error quotes, in bytes.
const quoteLimit = 64

func quote(s string) string { return strconv.Quote(text.Cut(s, quoteLimit)) }

// ValidateID checks that a request id can stand as one subject token, header
// value and log field: at most MaxIDLen bytes of printable UTF-8, without
// spaces, control or format characters, '.', '*' or '>' (docs/requests.md).
func ValidateID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: id is empty", ErrBadRequest)
	case len(id) > MaxIDLen:
		return fmt.Errorf("%w: id is longer than %d bytes", ErrBadRequest, MaxIDLen)
	case !utf8.ValidString(id):
		// msgpack strings, and header values, may hold any bytes.
		return fmt.Errorf("%w: id %s is not valid UTF-8", ErrBadRequest, quote(id))
	}
	for _, r := range id {
		if !idRune(r) {
			return fmt.Errorf("%w: id %s must be one subject token (no '.', '*', '>', spaces or invisible characters)", ErrBadRequest, quote(id))
		}
	}
	return nil
}

func idRune(r rune) bool {
	switch {
	case r == '.', r == '*', r == '>':
		return false // a token separator and the wildcards
	case unicode.IsSpace(r), unicode.IsControl(r), unicode.Is(unicode.Cf, r):
		// A space splits a subject; a control or format character makes
		// two ids that print alike, or rewrites a terminal.
		return false
	}
	return unicode.IsPrint(r)
}

// ValidateReplySubject refuses a reply subject that is not a plain publish
// subject under one of the allowed prefixes, so that no request can make a
// processor publish to $JS.API.… or a subject the server would drop its
// connection for: at most MaxReplySubjectLen bytes of printable ASCII without
// spaces, in at most MaxReplySubjectTokens non-empty tokens, none a wildcard.
func ValidateReplySubject(subject string, prefixes []string) error {
	if err := checkPublishSubject(subject); err != nil {
		return fmt.Errorf("%w: %s is not a valid publish subject: %v", ErrBadReplySubject, quote(subject), err)
	}
	for _, p := range prefixes {
		if strings.HasPrefix(subject, p) && len(subject) > len(p) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s must start with one of %s", ErrBadReplySubject, quote(subject), strings.Join(prefixes, ", "))
}

// checkPublishSubject says what keeps s from being a plain publish subject.
func checkPublishSubject(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("it is empty")
	case len(s) > MaxReplySubjectLen:
		return fmt.Errorf("it is %d bytes long, over the limit of %d", len(s), MaxReplySubjectLen)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("it holds %q at byte %d (only printable ASCII without spaces)", c, i)
		}
	}
	tokens := strings.Split(s, ".")
	if len(tokens) > MaxReplySubjectTokens {
		return fmt.Errorf("it has %d tokens, over the limit of %d", len(tokens), MaxReplySubjectTokens)
	}
	for _, tok := range tokens {
		switch tok {
		case "":
			return fmt.Errorf("it has an empty token")
		case "*", ">":
			return fmt.Errorf("it has the wildcard token %q", tok)
		}
	}
	return nil
}

// validateMetadata bounds a request's metadata (JSON scalars by then) to
// the Max* limits, and its numbers to finite ones.
func validateMetadata(m chain.Metadata) error {
	if len(m) > MaxMetadataKeys {
		return fmt.Errorf("%w: metadata has %d keys, over the limit of %d", ErrBadRequest, len(m), MaxMetadataKeys)
	}
	for k, v := range m {
		if metadataEntryError(k, v) != nil {
			// Of several bad entries, the same one is named every time.
			for _, k := range slices.Sorted(maps.Keys(m)) {
				if err := metadataEntryError(k, m[k]); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func metadataEntryError(k string, v any) error {
	if len(k) > MaxMetadataKeyLen {
		return fmt.Errorf("%w: metadata key %s is longer than %d bytes", ErrBadRequest, quote(k), MaxMetadataKeyLen)
	}
	var size int
	finite := true
	switch v := v.(type) {
	case string:
		size = len(v)
	case json.Number:
		size = len(v)
		f, err := strconv.ParseFloat(string(v), 64)
		finite = err == nil && !math.IsInf(f, 0)
	case float32, float64:
		f := reflect.ValueOf(v).Float()
		finite = !math.IsNaN(f) && !math.IsInf(f, 0)
	}
	switch {
	case size > MaxMetadataValueLen:
		return fmt.Errorf("%w: metadata[%s] is longer than %d bytes", ErrBadRequest, quote(k), MaxMetadataValueLen)
	case !finite:
		return fmt.Errorf("%w: metadata[%s] must be a finite number", ErrBadRequest, quote(k))
	}
	return nil
}
