package kvstate_test

import (
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/kvstate"
)

// records returns the records s's mirror holds, as text.
func records(s *kvstate.Store) []string {
	var out []string
	for _, r := range s.Running() {
		out = append(out, string(r))
	}
	return out
}

// TestRunningRecordsAreSeenRenewedWithdrawnAndExpire: a processor's record
// reaches every mirror; writing it again replaces it and keeps its TTL;
// withdrawn, it is gone; one left alone expires with its TTL, so a
// processor that stopped without a word stops counting.
func TestRunningRecordsAreSeenRenewedWithdrawnAndExpire(t *testing.T) {
	e := setup(t)
	a, b := e.store(t, "host.a-1-x", nil), e.store(t, "host-b-2-y", nil)
	if err := a.Record(e.ctx, "host.a-1-x", []byte(`{"processor":"host.a-1-x","n":1}`), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := a.Record(e.ctx, "host.a-1-x", []byte(`{"processor":"host.a-1-x","n":2}`), time.Minute); err != nil {
		t.Fatalf("renewing: %v", err)
	}
	if err := b.Record(e.ctx, "host-b-2-y", []byte(`{"processor":"host-b-2-y"}`), time.Second); err != nil {
		t.Fatal(err)
	}
	want := []string{`{"processor":"host-b-2-y"}`, `{"processor":"host.a-1-x","n":2}`}
	eventually(t, 5*time.Second, "both mirrors hold both records", func() bool {
		return slices.Equal(records(a), want) && slices.Equal(records(b), want)
	})
	entry, err := e.kv.Get(e.ctx, kvstate.RunningKey("host.a-1-x"))
	if err != nil || entry.Key() != "host_a-1-x.running" {
		t.Fatalf("a's key: %v, %v", entry, err)
	}
	if ttl := rawTTL(t, e, entry.Key()); ttl != "1m0s" {
		t.Errorf("a's renewed record has TTL %q, want 1m0s", ttl)
	}
	if err := a.Withdraw(e.ctx, "host.a-1-x"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "b's record expires and a's is withdrawn", func() bool {
		return len(a.Running()) == 0 && len(b.Running()) == 0
	})
}

// rawTTL returns the TTL header of key's last message.
func rawTTL(t *testing.T, e env, key string) string {
	t.Helper()
	s, err := e.js.Stream(e.ctx, "KV_"+kvstate.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(e.ctx, "$KV."+kvstate.Bucket+"."+key)
	if err != nil {
		t.Fatal(err)
	}
	return m.Header.Get(jetstream.MsgTTLHeader)
}
