package config

import (
	"testing"

	"github.com/detourhq/detour/wire"
)

// TestReplyPrefixesMayNotReachDetoursOwnQueues: config cannot import the
// wire package (it knows no NATS), so it names the subjects it protects
// itself; this checks them against the wire format's, by behaviour: a reply
// prefix that would let a request publish into detour's own requests or
// dead letters is refused, and one for results is not.
func TestReplyPrefixesMayNotReachDetoursOwnQueues(t *testing.T) {
	for _, prefix := range []string{wire.RequestsPrefix, wire.DeadLetterPrefix, wire.RequestSubject("default") + "."} {
		s := validSettings(t)
		s.ReplyPrefixes = []string{prefix}
		if err := s.Validate(); err == nil {
			t.Errorf("reply prefix %q accepted", prefix)
		}
	}
	s := validSettings(t)
	s.ReplyPrefixes = []string{wire.ResultsPrefix}
	if err := s.Validate(); err != nil {
		t.Errorf("reply prefix %q refused: %v", wire.ResultsPrefix, err)
	}
}

func validSettings(t *testing.T) Settings {
	t.Helper()
	clearEnv(t)
	s, err := LoadSettings()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
