package stream

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/detourhq/detour/deadletter"
	"github.com/detourhq/detour/wire"
)

// TestFailedResultError: a failed result's error starts with the dead-letter
// reason, says why once, on one line, and is bounded.
func TestFailedResultError(t *testing.T) {
	tests := []struct {
		reason deadletter.Reason
		cause  error
		want   string
	}{
		{deadletter.ReasonBadRequest, fmt.Errorf("%w: id is empty", wire.ErrBadRequest), "bad_request: id is empty"},
		{deadletter.ReasonBadReplySubject, fmt.Errorf("%w: \"x\" must start with one of _INBOX.", wire.ErrBadReplySubject),
			`bad_reply_subject: "x" must start with one of _INBOX.`},
		{deadletter.ReasonExpired, errors.New("deadline passed before any provider answered"), "expired: deadline passed before any provider answered"},
		{deadletter.ReasonPoison, errors.New("first line\r\nsecond\nthird"), "poison: first line second third"},
		// Only a wire error loses its prefix.
		{deadletter.ReasonTooLarge, errors.New("bad request: kept"), "too_large: bad request: kept"},
	}
	for _, tt := range tests {
		if got := failedResultError(tt.reason, tt.cause); got != tt.want {
			t.Errorf("failedResultError(%s, %q) = %q, want %q", tt.reason, tt.cause, got, tt.want)
		}
	}
	long := failedResultError(deadletter.ReasonPoison, errors.New(strings.Repeat("é", 2000)))
	if len(long) > maxResultError+len("…") || !strings.HasSuffix(long, "…") || !utf8.ValidString(long) {
		t.Errorf("a long error is not cut to %d bytes: %d bytes", maxResultError, len(long))
	}
}
