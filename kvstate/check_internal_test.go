package kvstate

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// FuzzValuesReadWritable: whatever a key of the bucket holds, the state a
// reader makes of it (the mirror's status row, the watch's state and
// opened events) can be written as JSON.
func FuzzValuesReadWritable(f *testing.F) {
	f.Add(`{"consecutive_failures":3,"trips":1,"last_trip":"9999-12-31T23:00:00Z","last_trip_s":7200}`,
		`{"until":"9999-12-31T23:59:59Z","duration_s":9223372036}`, `{"until":"9999-12-31T23:59:59Z"}`)
	f.Add(`{"trips":1,"last_trip":"9999-12-31T23:59:59-23:59","last_trip_s":-1}`,
		`{"until":"2030-01-01T00:00:00Z","trip":-1,"duration_s":-1}`, `{}`)
	f.Add(`{"consecutive_failures":-1,"trips":9223372036854775807}`, `not json`, `{"until":"0000-01-01T00:00:00Z"}`)
	f.Add(`{"consecutive_failures":0,"trips":0,"reset_at":"9999-12-31T23:59:59Z","reset_by":"alice@host"}`,
		`{"until":"0000-01-01T00:00:00Z","duration_s":31536000,"operator":true,"by":"alice@host"}`, `{}`)
	written := time.Date(2026, 11, 30, 23, 5, 4, 0, time.UTC)
	f.Fuzz(func(t *testing.T, health, cooldown, probe string) {
		s := New(nil, nil, Options{})
		tr := newTracker()
		for i, kv := range [][2]string{{"p.health", health}, {"p.cooldown", cooldown}, {"p.probe", probe}} {
			e := entry{key: kv[0], value: []byte(kv[1]), rev: uint64(i + 1), created: written, op: jetstream.KeyValuePut}
			s.apply(e)
			for _, ev := range tr.events(e) {
				if _, err := json.Marshal(ev); err != nil {
					t.Fatalf("event %+v as JSON: %v", ev, err)
				}
			}
		}
		rows := s.Status(written, "p")
		if _, err := json.Marshal(rows); err != nil {
			t.Fatalf("status rows as JSON: %v", err)
		}
		for _, ev := range tr.states(written, nil) {
			if _, err := json.Marshal(ev); err != nil {
				t.Fatalf("state event as JSON: %v", err)
			}
		}
	})
}
