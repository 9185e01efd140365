package deadletter_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/detourhq/detour/deadletter"
	"github.com/detourhq/detour/internal/text/texttest"
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

// TestWriteMessageTextBody: `dlq show` of a plain-text body sent without a
// Content-Type prints the text, not the first byte read as msgpack; bytes
// that are not text are a hex dump.
func TestWriteMessageTextBody(t *testing.T) {
	stored := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	m := deadletter.Message{
		Entry:  deadletter.Entry{Seq: 7, Time: stored, Chain: "default", Reason: deadletter.ReasonBadRequest, RequestID: "7"},
		Header: nats.Header{deadletter.HeaderReason: {"bad_request"}},
		Data:   []byte("good morning, sir!"),
	}
	var buf bytes.Buffer
	if err := deadletter.WriteMessage(&buf, m); err != nil {
		t.Fatal(err)
	}
	want := "dead letter 7: chain default, reason bad_request, id 7, stored 2026-03-01T12:00:00Z\n" +
		"\nheaders:\n  Detour-DLQ-Reason: bad_request\n" +
		"\nbody (18 bytes, text):\ngood morning, sir!\n"
	if buf.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", buf.String(), want)
	}

	m.Data = []byte{'g', 0x00, 0xff}
	buf.Reset()
	if err := deadletter.WriteMessage(&buf, m); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(buf.String(), "\nbody (3 bytes, binary):\n00000000  67 00 ff                                          |g..|\n") {
		t.Fatalf("binary body:\n%s", buf.String())
	}
}

// forgedID is a request id a client chose: a window title, a screen clear,
// and a line feed followed by what would read as a row of its own.
const forgedID = "x\x1b]0;pwned\a\x1b[2J\n999  2026-01-01T00:00:00Z  default  poison  FORGED-ROW"

// TestWriteTableShowsControlsAsEscapes: `dlq list` prints a request id,
// error, chain and reason holding terminal controls as escapes, each dead
// letter on one row.
func TestWriteTableShowsControlsAsEscapes(t *testing.T) {
	var buf bytes.Buffer
	err := deadletter.WriteTable(&buf, []deadletter.Entry{{
		Seq: 3, Chain: "de\x1b[31mfault", Reason: "poi\rson", RequestID: forgedID,
		Error: "HTTP 400: bad input \x1b]52;c;cHduZWQ=\a\u202eevil",
	}})
	if err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	texttest.AssertVisible(t, out)
	if lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); len(lines) != 2 {
		t.Fatalf("%d lines, want the heading and one row:\n%s", len(lines), out)
	}
	for _, want := range []string{`de\x1b[31mfault`, `poi\rson`, `x\x1b]0;pwned\a\x1b[2J\n999`, `bad input \x1b]52;c;cHduZWQ=\a\u202eevil`} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %s:\n%s", want, out)
		}
	}
}

// TestWriteMessageShowsControlsAsEscapes: `dlq show` prints the id, the
// header keys and values and a text body holding terminal controls as
// escapes; the body keeps its own lines.
func TestWriteMessageShowsControlsAsEscapes(t *testing.T) {
	m := deadletter.Message{
		Entry: deadletter.Entry{Seq: 4, Chain: "default", Reason: deadletter.ReasonBadRequest, RequestID: forgedID},
		Header: nats.Header{
			deadletter.HeaderError: {"request (HTTP 400): bad input \x1b]0;pwned-by-provider\a\x1b[2J done"},
			"X-Trace":              {"t\x1b]0;pwned-title\a\x1b[2J"},
			"X-\x1b[8mHidden":      {"v"},
		},
		Data: []byte("line one\r   forged\nline two \u0085\v\n"),
	}
	var buf bytes.Buffer
	if err := deadletter.WriteMessage(&buf, m); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	texttest.AssertVisible(t, out)
	for _, want := range []string{
		`dead letter 4: chain default, reason bad_request, id x\x1b]0;pwned\a\x1b[2J\n999  2026-01-01T00:00:00Z  default  poison  FORGED-ROW, stored `,
		"  Detour-DLQ-Error: request (HTTP 400): bad input \\x1b]0;pwned-by-provider\\a\\x1b[2J done\n",
		"  X-Trace: t\\x1b]0;pwned-title\\a\\x1b[2J\n",
		"  X-\\x1b[8mHidden: v\n",
		"body (32 bytes, text):\nline one\\r   forged\nline two \\u0085\\v\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
}

// TestWriteReplayedShowsControlsAsEscapes: `dlq replay` prints a forged
// request id as escapes, on the replay's one line.
func TestWriteReplayedShowsControlsAsEscapes(t *testing.T) {
	var buf bytes.Buffer
	err := deadletter.WriteReplayed(&buf, []deadletter.Replayed{{Seq: 4, RequestID: forgedID, Subject: "detour.requests.d\x1b[2J", StreamSeq: 9}})
	if err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	texttest.AssertVisible(t, out)
	want := `replayed 4: id x\x1b]0;pwned\a\x1b[2J\n999  2026-01-01T00:00:00Z  default  poison  FORGED-ROW to detour.requests.d\x1b[2J as sequence 9` + "\n" +
		"replayed 1 dead letter(s)\n"
	if out != want {
		t.Fatalf("got\n%s\nwant\n%s", out, want)
	}
}
