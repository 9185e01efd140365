package deadletter_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/nats-io/nats.go"

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

// TestWriteMessageJSON: `dlq show -json` prints the entry's fields, the
// headers and the body, base64-encoded so that any bytes survive.
func TestWriteMessageJSON(t *testing.T) {
	body := []byte{0x82, 0xa2, 'i', 'd', 0xa1, 'x', 0xff}
	m := deadletter.Message{
		Entry:  deadletter.Entry{Seq: 5, Chain: "default", Reason: deadletter.ReasonPoison, RequestID: "x", Size: len(body)},
		Header: nats.Header{deadletter.HeaderReason: {"poison"}},
		Data:   body,
	}
	var buf bytes.Buffer
	if err := deadletter.WriteMessageJSON(&buf, m); err != nil {
		t.Fatal(err)
	}
	var got struct {
		deadletter.Entry
		Header nats.Header `json:"header"`
		Body   []byte      `json:"body"`
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("%v:\n%s", err, buf.String())
	}
	if got.Entry != m.Entry || got.Header.Get(deadletter.HeaderReason) != "poison" || !bytes.Equal(got.Body, body) {
		t.Fatalf("decoded %+v from\n%s", got, buf.String())
	}
	if !bytes.Contains(buf.Bytes(), []byte("\n  \"seq\": 5,")) {
		t.Fatalf("not indented:\n%s", buf.String())
	}
}
