package chain

import (
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/detourhq/detour/internal/text"
)

// This file keeps a provider's API key out of every text taken from its
// responses, which reach results, dead letters, logs, state and metrics:
// an endpoint may echo the key (a gateway quoting the request, a hostile
// one in its answer).

// redactedKey stands in for the key.
const redactedKey = "[redacted]"

// redactKey replaces apiKey in s. Text from a JSON document may spell the
// key with escapes ("\u002d", "\/"): when reading them shows the key, s is
// shown with its escapes read.
func redactKey(s, apiKey string) string {
	if apiKey == "" {
		return s
	}
	s = strings.ReplaceAll(s, apiKey, redactedKey)
	if strings.Contains(s, `\u`) || strings.Contains(s, `\/`) {
		if plain := unescape(s); strings.Contains(plain, apiKey) {
			s = strings.ReplaceAll(plain, apiKey, redactedKey)
		}
	}
	return s
}

// unescape reads the escapes of s that can spell a key, \uXXXX (a pair as
// one character) and \/, wherever they are; s need not be JSON. Other
// escapes are kept as written, so "\\u0041" stays a backslash and "u0041".
func unescape(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		if s[i+1] == '/' {
			b.WriteByte('/')
			i++
			continue
		}
		switch r, size := text.UnicodeEscape(s, i); {
		case size == 0: // another escape: both bytes as written
			b.WriteString(s[i : i+2])
			i++
		case r < 0: // half a pair alone: U+FFFD, swallowing nothing after it
			b.WriteRune(utf8.RuneError)
			i += size - 1
		default:
			b.WriteRune(r)
			i += size - 1
		}
	}
	return b.String()
}

// redactAnswer removes the key from every text of a decoded answer.
func redactAnswer(resp *Response, apiKey string) {
	for _, s := range []*string{&resp.Content, &resp.Model, &resp.StopReason, &resp.Refusal} {
		*s = redactKey(*s, apiKey)
	}
}

// redact removes the API key from a transport error's text; the error is
// replaced, not wrapped, so no caller can print the original.
func redact(err error, apiKey string) error {
	var ce *CallError
	if apiKey == "" || errors.As(err, &ce) || !strings.Contains(err.Error(), apiKey) {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), apiKey, redactedKey), cause: err}
}

// redactedError keeps the cause for classification while its text never
// shows the key.
type redactedError struct {
	msg   string
	cause error
}

func (e *redactedError) Error() string { return e.msg }

func (e *redactedError) Is(target error) bool { return errors.Is(e.cause, target) }

func (e *redactedError) Timeout() bool { return isTimeout(e.cause) }
