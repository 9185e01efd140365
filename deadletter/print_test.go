package deadletter_test

import (
	"bytes"
	"testing"

	"github.com/detourhq/detour/deadletter"
)

func TestWriteReplayed(t *testing.T) {
	var buf bytes.Buffer
	err := deadletter.WriteReplayed(&buf, []deadletter.Replayed{
		{Seq: 4, RequestID: "a", Subject: "detour.requests.default", StreamSeq: 10},
		{Seq: 7, RequestID: "b", Subject: "detour.requests.other", StreamSeq: 3, AlreadyQueued: true},
	})
	want := "replayed 4: id a to detour.requests.default as sequence 10\n" +
		"replayed 7: id b to detour.requests.other as sequence 3 (already queued by an earlier replay)\n" +
		"replayed 2 dead letter(s)\n"
	if err != nil || buf.String() != want {
		t.Fatalf("got (%v)\n%s\nwant\n%s", err, buf.String(), want)
	}
	buf.Reset()
	if err := deadletter.WriteReplayed(&buf, nil); err != nil || buf.String() != "replayed 0 dead letter(s)\n" {
		t.Fatalf("nothing replayed: %q (%v)", buf.String(), err)
	}
}
