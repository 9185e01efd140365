package deadletter_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/deadletter"
)

// TestDeadLetterLargerThanTheServerIsCutToFit: a request that fitted the
// server whole (1 MiB, the default max payload) no longer fits once the
// dead-letter headers are added; it is stored cut down, with the original
// size, rather than failing to store on every delivery, and it cannot be
// replayed as if it were the request.
func TestDeadLetterLargerThanTheServerIsCutToFit(t *testing.T) {
	e := newEnv(t)
	max := e.js.Conn().MaxPayload()
	body := bytes.Repeat([]byte("x"), int(max)-100)
	header := nats.Header{"App-Trace": {"abc"}, nats.MsgIdHdr: {"big-1"}}
	attempts := []chain.Attempt{{Provider: "p", Model: "m", Outcome: chain.OutcomeFailed, Class: chain.ClassServer, Error: strings.Repeat("e", 300)}}
	seq := e.letter(deadletter.Letter{Chain: "default", Reason: deadletter.ReasonTooLarge, Err: errors.New("too big"),
		SourceSeq: 7, Attempts: attempts, Data: body, Header: header})

	m, err := e.store.Get(context.Background(), seq)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Header.Get(deadletter.HeaderTrimmed); got != "true" {
		t.Errorf("%s = %q, want true", deadletter.HeaderTrimmed, got)
	}
	if got := m.Header.Get(deadletter.HeaderOriginalSize); got != strconv.Itoa(len(body)) {
		t.Errorf("%s = %q, want %d", deadletter.HeaderOriginalSize, got, len(body))
	}
	if len(m.Data) == 0 || len(m.Data) >= len(body) || !bytes.Equal(m.Data, body[:len(m.Data)]) {
		t.Errorf("stored body of %d bytes, want a non-empty prefix of the %d-byte request", len(m.Data), len(body))
	}
	if m.Header.Get(deadletter.HeaderReason) != string(deadletter.ReasonTooLarge) || m.Header.Get("App-Trace") != "abc" {
		t.Errorf("headers lost: %v", m.Header)
	}
	if _, err := e.store.Replay(context.Background(), seq, deadletter.ReplayOptions{}); err == nil || !strings.Contains(err.Error(), "cut down") {
		t.Errorf("replaying a cut-down dead letter: %v, want a refusal", err)
	}
	if q := e.queued("default"); len(q) != 0 {
		t.Errorf("%d requests queued by the refused replay", len(q))
	}
}

// TestDeadLetterThatFitsIsUntouched: below the limit nothing is cut.
func TestDeadLetterThatFitsIsUntouched(t *testing.T) {
	e := newEnv(t)
	body := []byte(`{"messages":[{"role":"user","content":"hi"}]}`)
	seq := e.letter(deadletter.Letter{Chain: "default", Reason: deadletter.ReasonBadRequest, Err: errors.New("bad"), SourceSeq: 1, Data: body})
	m, err := e.store.Get(context.Background(), seq)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.Data, body) || m.Header.Get(deadletter.HeaderTrimmed) != "" || m.Header.Get(deadletter.HeaderOriginalSize) != "" {
		t.Errorf("a small dead letter was changed: %q %v", m.Data, m.Header)
	}
}

// TestDeadLetterDropsAttemptsBeforeTheBody: when leaving out the attempt
// list is enough to fit, the body stays whole and replayable.
func TestDeadLetterDropsAttemptsBeforeTheBody(t *testing.T) {
	e := newEnv(t)
	body := bytes.Repeat([]byte("y"), int(e.js.Conn().MaxPayload())-3000)
	var attempts []chain.Attempt
	for range 12 {
		attempts = append(attempts, chain.Attempt{Provider: "p", Model: "m", Outcome: chain.OutcomeFailed, Class: chain.ClassServer, Error: strings.Repeat("e", 300)})
	}
	seq := e.letter(deadletter.Letter{Chain: "default", Reason: deadletter.ReasonExpired, Err: errors.New("late"), SourceSeq: 3, Attempts: attempts, Data: body})
	m, err := e.store.Get(context.Background(), seq)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.Data, body) || m.Header.Get(deadletter.HeaderTrimmed) != "" {
		t.Errorf("body of %d bytes (trimmed %q), want the whole %d bytes", len(m.Data), m.Header.Get(deadletter.HeaderTrimmed), len(body))
	}
	if m.Header.Get(deadletter.HeaderAttempts) != "" {
		t.Error("the attempt list was kept although it does not fit")
	}
}
