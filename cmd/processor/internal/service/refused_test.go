package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/deadletter"
	"github.com/detourhq/detour/wire"
)

// refusedCase is one request a processor refuses on arrival.
type refusedCase struct {
	id     string // the id a failed result is expected under; "" for none
	body   []byte
	header nats.Header
	// replyTo is where the failed result is expected besides
	// detour.results.<id>; "" for nowhere else.
	replyTo string
	reason  deadletter.Reason
	// says is a part of the failed result's error.
	says string
	// mp: the request, and so its result, is msgpack.
	mp bool
}

// TestRefusedRequestsAreAnswered is acceptance 3 of the request/reply issue:
// each bad input that carries a readable id and reply_to yields a failed
// result there, and on its result subject, with the reason; and its dead
// letter. A reply subject the request may not name receives nothing: the
// failed result goes to the request's own result subject alone.
func TestRefusedRequestsAreAnswered(t *testing.T) {
	solo := providertest.New(providertest.OpenAI, providertest.OK())
	defer solo.Close()
	h := newHarness(t)
	settings := testSettings()
	settings.MaxPayload = 200 << 10 // below the server's 1 MiB, so a larger body is stored and refused
	h.startProcessor(parseChainFile(t, okChain(t, solo.URL)), settings)

	jsonBody := func(id string, fields string) []byte {
		return []byte(`{"id":"` + id + `","reply_to":"_INBOX.refused.` + id + `","messages":[{"role":"user","content":"hi"}]` + fields + `}`)
	}
	mpBody := func(id string, fields map[string]any) []byte {
		m := map[string]any{"id": id, "reply_to": "_INBOX.refused." + id, "messages": []any{map[string]any{"role": "user", "content": "hi"}}}
		for k, v := range fields {
			m[k] = v
		}
		b, err := msgpack.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	bigSchema := `{"type":"object","description":"` + strings.Repeat("x", 70<<10) + `"}`
	deepSchema := strings.Repeat(`{"items":`, 40) + `{}` + strings.Repeat(`}`, 40)
	cases := []refusedCase{
		{id: "r-messages", body: []byte(`{"id":"r-messages","reply_to":"_INBOX.refused.r-messages","messages":"hi"}`),
			reason: deadletter.ReasonBadRequest, says: "messages must be a list of {role, content} objects, not a string"},
		{id: "r-role", body: []byte(`{"id":"r-role","reply_to":"_INBOX.refused.r-role","messages":[{"role":7}]}`),
			reason: deadletter.ReasonBadRequest, says: "messages[0].role must be a string, not a number"},
		{id: "r-no-messages", body: []byte(`{"id":"r-no-messages","reply_to":"_INBOX.refused.r-no-messages","messages":[]}`),
			reason: deadletter.ReasonBadRequest, says: "messages is required"},
		{id: "r-max-tokens", body: jsonBody("r-max-tokens", `,"max_tokens":"many"`),
			reason: deadletter.ReasonBadRequest, says: "max_tokens must be an integer, not a string"},
		{id: "r-temperature", body: jsonBody("r-temperature", `,"temperature":-1`),
			reason: deadletter.ReasonBadRequest, says: "temperature must be a finite number, not negative"},
		{id: "r-schema-size", body: jsonBody("r-schema-size", `,"response_schema":`+bigSchema),
			reason: deadletter.ReasonBadRequest, says: "response_schema is larger than 65536 bytes"},
		{id: "r-schema-depth", body: jsonBody("r-schema-depth", `,"response_schema":`+deepSchema),
			reason: deadletter.ReasonBadRequest, says: "response_schema nests deeper than 32 levels"},
		{id: "r-schema-compile", body: jsonBody("r-schema-compile", `,"response_schema":{"type":12}`),
			reason: deadletter.ReasonBadRequest, says: "response_schema"},
		{id: "r-deadline", body: jsonBody("r-deadline", `,"deadline":"tomorrow"`),
			reason: deadletter.ReasonBadRequest, says: `deadline "tomorrow" is not an RFC 3339 time`},
		{id: "r-metadata", body: jsonBody("r-metadata", `,"metadata":{"user":{"name":"x"}}`),
			reason: deadletter.ReasonBadRequest, says: `metadata["user"] is an object`},
		{id: "r-too-large", body: jsonBody("r-too-large", `,"metadata":{"pad":"`+strings.Repeat("x", 300<<10)+`"}`),
			reason: deadletter.ReasonTooLarge, says: "exceeds DETOUR_MAX_PAYLOAD 204800"},
		{id: "r-text", body: []byte("hello there"),
			header: nats.Header{wire.HeaderMsgID: {"r-text"}, wire.HeaderReplyTo: {"_INBOX.refused.r-text"}},
			reason: deadletter.ReasonBadRequest, says: `body is neither a JSON object nor msgpack: it reads as text, "hello there"`},
		{id: "r-content-type", body: jsonBody("r-content-type", ""), header: nats.Header{"Content-Type": {"text/plain"}},
			reason: deadletter.ReasonBadRequest, says: "unsupported Content-Type"},
		{id: "r-mp-type", body: mpBody("r-mp-type", map[string]any{"max_tokens": "many"}), mp: true,
			reason: deadletter.ReasonBadRequest, says: "max_tokens must be an integer, not a string"},
		{id: "r-mp-deadline", body: mpBody("r-mp-deadline", map[string]any{"deadline": 1_900_000_000}), mp: true,
			reason: deadletter.ReasonBadRequest, says: "deadline must be an RFC 3339 string or a msgpack timestamp, not an integer"},
		{id: "r-mp-expired", body: mpBody("r-mp-expired", map[string]any{"deadline": time.Now().Add(-time.Hour)}), mp: true,
			reason: deadletter.ReasonExpired, says: "deadline passed"},
		// A reply subject the request may not name: the failed result goes
		// to its own result subject alone.
		{id: "r-api", body: []byte(`{"id":"r-api","reply_to":"$JS.API.STREAM.DELETE.DETOUR_RESULTS","messages":[{"role":"user"}]}`),
			reason: deadletter.ReasonBadReplySubject, says: "must start with one of detour.results., _INBOX."},
		{id: "r-other", body: []byte(`{"id":"r-other","reply_to":"detour.results.someone-else","messages":[{"role":"user"}]}`),
			reason: deadletter.ReasonBadReplySubject, says: `"detour.results.someone-else" is another request's result subject`},
		{id: "r-wildcard", body: []byte(`{"id":"r-wildcard","reply_to":"_INBOX.>","metadata":{"n":[]}}`),
			reason: deadletter.ReasonBadRequest, says: `metadata["n"] is a list`},
		{id: "r-reply-type", body: []byte(`{"id":"r-reply-type","reply_to":["_INBOX.x"],"messages":[{"role":"user"}]}`),
			header: nats.Header{wire.HeaderReplyTo: {"_INBOX.refused.header"}},
			reason: deadletter.ReasonBadRequest, says: "reply_to must be a string, not a list"},
		// No id to answer under: the dead letter is all.
		{body: []byte(`{"id":"a.b","reply_to":"_INBOX.refused.dotted","messages":[{"role":"user"}]}`),
			reason: deadletter.ReasonBadRequest},
		{body: []byte(`{"id":17,"reply_to":"_INBOX.refused.number","messages":[{"role":"user"}]}`),
			reason: deadletter.ReasonBadRequest},
	}
	for i := range cases {
		if c := &cases[i]; c.id != "" && (strings.Contains(string(c.body), "_INBOX.refused."+c.id) || c.id == "r-text") {
			c.replyTo = "_INBOX.refused." + c.id
		}
	}

	// Every message that says it answers one of these requests, on any
	// subject.
	var mu sync.Mutex
	seen := map[string][]*nats.Msg{}
	all, err := h.nc.Subscribe(">", func(m *nats.Msg) {
		if id := m.Header.Get(wire.HeaderRequestID); id != "" {
			mu.Lock()
			seen[id] = append(seen[id], m)
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = all.Unsubscribe() }()
	if err := h.nc.Flush(); err != nil {
		t.Fatal(err)
	}

	seqs := map[string]refusedCase{}
	for _, c := range cases {
		ack := h.publishRaw("default", c.body, c.header)
		seqs[strconv.FormatUint(ack.Sequence, 10)] = c
	}

	eventually(t, 20*time.Second, "a dead letter for each request", func() bool { return len(h.deadLetters()) == len(cases) })
	for _, dl := range h.deadLetters() {
		seq := dl.Header.Get(deadletter.HeaderSourceSeq)
		c, ok := seqs[seq]
		if !ok {
			t.Fatalf("dead letter of unknown request %s", seq)
		}
		delete(seqs, seq)
		if got := deadletter.Reason(dl.Header.Get(deadletter.HeaderReason)); got != c.reason {
			t.Errorf("%s: dead letter reason %s, want %s (%s)", c.id, got, c.reason, dl.Header.Get(deadletter.HeaderError))
		}
		if string(dl.Data) != string(c.body) {
			t.Errorf("%s: dead letter body changed", c.id)
		}
		if c.id == "" {
			continue
		}
		res, header := h.waitResult(c.id, 10*time.Second)
		if res.ID != c.id || res.Status != chain.StatusFailed || res.Content != "" || res.Deliveries != 1 {
			t.Errorf("%s: stored result %+v, want a failed one", c.id, res)
		}
		if prefix := string(c.reason) + ": "; !strings.HasPrefix(res.Error, prefix) || !strings.Contains(res.Error, c.says) {
			t.Errorf("%s: error %q, want %q and %q", c.id, res.Error, prefix, c.says)
		}
		want := map[string]string{
			wire.HeaderStatus: "failed", wire.HeaderRequestID: c.id, wire.HeaderRequestSeq: seq,
			wire.HeaderContentType: "application/json", wire.HeaderDegraded: "false",
		}
		if c.mp {
			want[wire.HeaderContentType] = "application/msgpack"
		}
		for k, v := range want {
			if got := header.Get(k); got != v {
				t.Errorf("%s: stored result header %s = %q, want %q", c.id, k, got, v)
			}
		}
		if at := header.Get(wire.HeaderRequestTime); at == "" {
			t.Errorf("%s: stored result has no %s", c.id, wire.HeaderRequestTime)
		}
	}

	// Each answer went to its result subject and its allowed reply
	// subject, and nowhere else.
	eventually(t, 10*time.Second, "every reply", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range cases {
			if c.id != "" && len(seen[c.id]) < 1+btoi(c.replyTo != "") {
				return false
			}
		}
		return true
	})
	time.Sleep(200 * time.Millisecond) // room for a stray publish to show
	mu.Lock()
	defer mu.Unlock()
	for _, c := range cases {
		if c.id == "" {
			continue
		}
		subjects := map[string]bool{}
		for _, m := range seen[c.id] {
			subjects[m.Subject] = true
			if m.Subject != wire.ResultSubject(c.id) && m.Subject != c.replyTo {
				t.Errorf("%s: a message on %s", c.id, m.Subject)
			}
		}
		if !subjects[wire.ResultSubject(c.id)] || (c.replyTo != "" && !subjects[c.replyTo]) {
			t.Errorf("%s: answered on %v, want %s and %q", c.id, subjects, wire.ResultSubject(c.id), c.replyTo)
		}
	}
	if len(seen) != len(cases)-2 {
		t.Errorf("answers for %d ids, want %d: %v", len(seen), len(cases)-2, keys(seen))
	}
	// Nothing was stored under another request's result subject.
	results, err := h.js.Stream(context.Background(), wire.ResultsStream)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := results.GetLastMsgForSubject(context.Background(), "detour.results.someone-else"); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("a result under another request's subject: %v", err)
	}
	if solo.Requests() != 0 {
		t.Errorf("provider called %d times for refused requests", solo.Requests())
	}
}

// TestRefusedReplyDecodes: the failed result of a refused msgpack request
// comes back in msgpack, readable by a generic decoder, with the reason.
func TestRefusedReplyDecodes(t *testing.T) {
	solo := providertest.New(providertest.OpenAI, providertest.OK())
	defer solo.Close()
	h := newHarness(t)
	h.startProcessor(parseChainFile(t, okChain(t, solo.URL)), testSettings())
	sub, err := h.nc.SubscribeSync("_INBOX.refused.mp")
	if err != nil {
		t.Fatal(err)
	}
	body, err := msgpack.Marshal(map[string]any{"id": "mp", "reply_to": "_INBOX.refused.mp", "messages": "hi"})
	if err != nil {
		t.Fatal(err)
	}
	h.publishRaw("default", body, nil)
	msg, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("no failed result on the reply subject: %v", err)
	}
	var generic map[string]any
	if err := msgpack.Unmarshal(msg.Data, &generic); err != nil {
		t.Fatalf("reply is not msgpack: %v", err)
	}
	if generic["status"] != "failed" || generic["id"] != "mp" ||
		generic["error"] != "bad_request: messages must be a list of {role, content} objects, not a string" {
		out, _ := json.Marshal(generic)
		t.Fatalf("reply %s", out)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
