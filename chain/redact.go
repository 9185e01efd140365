package chain

import (
	"encoding/json"
	"errors"
	"strings"
)

// This file keeps a provider's API key out of everything a provider sends
// back: its answers and its errors reach results, dead letters, logs, the
// provider state and metric labels. An endpoint may echo the key it was
// sent (a gateway repeating the request in an error, a hostile one in its
// answer), so every text taken from a response passes through here.

// redactedKey stands in for the key.
const redactedKey = "[redacted]"

// redactKey replaces apiKey in s. A JSON document (an error body kept as
// sent) may spell the key with escapes ("\u002d", "\/") that a plain
// search misses: one holding a backslash is read back with its strings
// unescaped, and when that shows the key, that spelling is used instead.
func redactKey(s, apiKey string) string {
	if apiKey == "" {
		return s
	}
	if strings.Contains(s, `\`) && !strings.Contains(s, apiKey) {
		if plain, ok := unescapedJSON(s); ok && strings.Contains(plain, apiKey) {
			s = plain
		}
	}
	return strings.ReplaceAll(s, apiKey, redactedKey)
}

// unescapedJSON is doc re-encoded with no escape that JSON does not
// require, and whether doc is JSON at all.
func unescapedJSON(doc string) (string, bool) {
	var v any
	if json.Unmarshal([]byte(doc), &v) != nil {
		return "", false
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return "", false
	}
	return strings.TrimSuffix(b.String(), "\n"), true
}

// redactAnswer removes the key from every text of a decoded answer: the
// content, the model, the stop reason and the refusal.
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

// redactedError keeps the cause for classification (Timeout, errors.Is on
// deadlines) while its text never shows the key.
type redactedError struct {
	msg   string
	cause error
}

func (e *redactedError) Error() string { return e.msg }

// Is and Timeout forward classification to the cause without exposing its text.
func (e *redactedError) Is(target error) bool { return errors.Is(e.cause, target) }

func (e *redactedError) Timeout() bool { return isTimeout(e.cause) }
