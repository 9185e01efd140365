package ask_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/cmd/processor/internal/ask"
	"github.com/detourhq/detour/deadletter"
	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/internal/topology"
	"github.com/detourhq/detour/wire"
)

// served is one ask.Serve on an embedded server with the requests stream,
// and no processor: what it stores stays in DETOUR_REQUESTS.
type served struct {
	t    *testing.T
	nc   *nats.Conn
	js   jetstream.JetStream
	stop func() error // ends Serve and returns what it returned
}

func serve(t *testing.T, maxPayload int, with ...func(*topology.Streams)) *served {
	t.Helper()
	srv := natstest.Start(t)
	nc, js := natstest.Connect(t, srv)
	ctx := context.Background()
	topo := topology.Streams{Chains: []string{"default"}, Replicas: 1,
		AckWait: 30 * time.Second, MaxAckPending: 100, ResultTTL: time.Hour}
	for _, w := range with {
		w(&topo)
	}
	err := topology.Ensure(ctx, js, topo)
	if err != nil {
		t.Fatal(err)
	}
	svcConn, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svcConn.Close)
	svcJS, err := jetstream.New(svcConn)
	if err != nil {
		t.Fatal(err)
	}
	serveCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- ask.Serve(serveCtx, ask.Config{Conn: svcConn, JetStream: svcJS, Chains: []string{"default"},
			ReplyPrefixes: []string{"detour.results.", "_INBOX."}, MaxPayload: maxPayload, Version: "1.2.3"})
	}()
	var once sync.Once
	var serveErr error
	stop := func() error {
		once.Do(func() { cancel(); serveErr = <-done })
		return serveErr
	}
	t.Cleanup(func() { _ = stop() })
	s := &served{t: t, nc: nc, js: js, stop: stop}
	s.waitInstances(1)
	return s
}

// instances pings the service and counts the instances that answer within
// a short window.
func instances(t *testing.T, nc *nats.Conn) int {
	t.Helper()
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	subject, err := micro.ControlSubject(micro.PingVerb, ask.ServiceName, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.PublishRequest(subject, inbox, nil); err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		if _, err := sub.NextMsg(200 * time.Millisecond); err != nil {
			return n
		}
		n++
	}
}

func (s *served) waitInstances(n int) {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for instances(s.t, s.nc) != n {
		if time.Now().After(deadline) {
			s.t.Fatalf("the service did not have %d instances within 10s", n)
		}
	}
}

// stored waits for the one message in DETOUR_REQUESTS.
func (s *served) stored() *jetstream.RawStreamMsg {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := s.js.Stream(ctx, wire.RequestsStream)
	if err != nil {
		s.t.Fatal(err)
	}
	for {
		m, err := st.GetLastMsgForSubject(ctx, wire.RequestSubject("default"))
		if err == nil {
			return m
		}
		if !errors.Is(err, jetstream.ErrMsgNotFound) {
			s.t.Fatalf("no stored request: %v", err)
		}
		select {
		case <-ctx.Done():
			s.t.Fatal("no stored request within 5s")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// stats is the endpoint stats of the one instance.
func (s *served) stats() micro.EndpointStats {
	s.t.Helper()
	subject, err := micro.ControlSubject(micro.StatsVerb, ask.ServiceName, "")
	if err != nil {
		s.t.Fatal(err)
	}
	m, err := s.nc.Request(subject, nil, 5*time.Second)
	if err != nil {
		s.t.Fatal(err)
	}
	var st micro.Stats
	if err := json.Unmarshal(m.Data, &st); err != nil {
		s.t.Fatal(err)
	}
	if len(st.Endpoints) != 1 {
		s.t.Fatalf("endpoints %+v, want one", st.Endpoints)
	}
	return *st.Endpoints[0]
}

// refusal checks that reply is micro's error reply with code, its body a
// failed result whose error holds want.
func refusal(t *testing.T, reply *nats.Msg, code, want string) {
	t.Helper()
	if got := reply.Header.Get(micro.ErrorCodeHeader); got != code {
		t.Fatalf("error code %q (%q), want %q", got, reply.Header.Get(micro.ErrorHeader), code)
	}
	desc := reply.Header.Get(micro.ErrorHeader)
	if !strings.Contains(desc, want) {
		t.Fatalf("error %q, want it to say %q", desc, want)
	}
	res, err := wire.DecodeResult(reply.Data, reply.Header)
	if err != nil {
		t.Fatalf("error reply body %q: %v", reply.Data, err)
	}
	if res.Status != chain.StatusFailed || res.Error != desc {
		t.Fatalf("error reply body %+v, want a failed result with the error %q", res, desc)
	}
}

// TestAskStoresTheRequestAsSent: the body and headers are stored as sent on
// detour.requests.<chain>, with the reply subject as Detour-Reply-To (one
// sent along is replaced), and the endpoint itself does not answer.
func TestAskStoresTheRequestAsSent(t *testing.T) {
	s := serve(t, 1<<20)
	inbox := s.nc.NewRespInbox()
	replies, err := s.nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"id":"q1","messages":[{"role":"user","content":"hi"}]}`
	msg := nats.NewMsg(wire.AskSubject("default"))
	msg.Reply = inbox
	msg.Data = []byte(body)
	msg.Header.Set("Content-Type", "application/json; charset=utf-8")
	msg.Header.Set("App-Trace", "abc")
	msg.Header.Set(wire.HeaderReplyTo, "_INBOX.elsewhere")
	if err := s.nc.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	m := s.stored()
	if string(m.Data) != body {
		t.Fatalf("stored body %q, want %q", m.Data, body)
	}
	for k, want := range map[string]string{
		"Content-Type": "application/json; charset=utf-8", "App-Trace": "abc", wire.HeaderReplyTo: inbox,
		wire.HeaderMsgID: "", // the body names its id
	} {
		if got := m.Header.Get(k); got != want {
			t.Errorf("stored %s %q, want %q", k, got, want)
		}
	}
	eventually(t, "the ask counted", func() bool { return s.stats().NumRequests == 1 })
	if st := s.stats(); st.NumErrors != 0 {
		t.Fatalf("stats %+v, want no errors", st)
	}
	if err := s.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := replies.Pending(); n != 0 {
		t.Fatalf("%d replies to a stored request, want none: its result is the answer", n)
	}
}

// TestAskWithoutIDGetsOne: a request that names no id gets a unique
// Nats-Msg-Id, so its id is not a stream sequence that a recreated stream
// hands out again.
func TestAskWithoutIDGetsOne(t *testing.T) {
	s := serve(t, 1<<20)
	msg := nats.NewMsg(wire.AskSubject("default"))
	msg.Reply = s.nc.NewRespInbox()
	msg.Data = []byte(`{"messages":[{"role":"user","content":"hi"}]}`)
	if err := s.nc.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	m := s.stored()
	d, err := wire.DecodeRequest(m.Data, m.Header, m.Sequence, []string{"_INBOX."})
	if err != nil {
		t.Fatal(err)
	}
	if id := m.Header.Get(wire.HeaderMsgID); len(id) != 22 || d.ID != id || d.ReplyTo != msg.Reply {
		t.Fatalf("stored with Nats-Msg-Id %q, read as id %q replying to %q", id, d.ID, d.ReplyTo)
	}
}

// TestAskWithoutReplySubjectIsStored: a publish to the endpoint, with nobody
// to answer, is stored as if published to detour.requests.<chain>.
func TestAskWithoutReplySubjectIsStored(t *testing.T) {
	s := serve(t, 1<<20)
	body := `{"messages":[{"role":"user","content":"fire and forget"}]}`
	if err := s.nc.Publish(wire.AskSubject("default"), []byte(body)); err != nil {
		t.Fatal(err)
	}
	m := s.stored()
	if string(m.Data) != body || m.Header.Get(wire.HeaderReplyTo) != "" {
		t.Fatalf("stored %q with headers %v, want the body as sent and no reply subject", m.Data, m.Header)
	}
}

// TestAskRefusals: what a processor would dead-letter, and what cannot be
// stored, is answered at once with micro's error reply, and nothing is
// stored.
func TestAskRefusals(t *testing.T) {
	s := serve(t, 1024)
	send := func(body string, h nats.Header) *nats.Msg {
		t.Helper()
		msg := nats.NewMsg(wire.AskSubject("default"))
		msg.Data = []byte(body)
		for k, v := range h {
			msg.Header[k] = v
		}
		start := time.Now()
		reply, err := s.nc.RequestMsg(msg, 10*time.Second)
		if err != nil {
			t.Fatalf("no reply: %v", err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("the error reply took %s", took)
		}
		return reply
	}
	big := send(`{"id":"big","messages":[{"role":"user","content":"`+strings.Repeat("x", 1100)+`"}]}`, nil)
	refusal(t, big, ask.CodeTooLarge, "exceeds DETOUR_MAX_PAYLOAD 1024")
	if res, _ := wire.DecodeResult(big.Data, big.Header); res.ID != "big" || big.Header.Get(wire.HeaderRequestID) != "big" {
		t.Errorf("a too large request's reply names id %q (header %q), want the id its body gives", res.ID, big.Header.Get(wire.HeaderRequestID))
	}
	refusal(t, send(`{"id":"q2","messages":[]}`, nil), ask.CodeBadRequest, "bad request: messages is required")
	refusal(t, send(`{"id":"q3","messages":[{"role":"user","content":"hi"}],"reply_to":"_INBOX.other"}`, nil),
		ask.CodeBadRequest, `reply_to "_INBOX.other"`)
	refusal(t, send("plain text", header("Content-Type", "text/plain")), ask.CodeBadRequest, "unsupported Content-Type")
	refusal(t, send(`{"id":"q6","messages":[{"role":"user","content":"hi"}],"response_schema":{"type":"nope"}}`, nil),
		ask.CodeBadRequest, "bad request: response_schema")
	refusal(t, send(`{"id":"q4","messages":[{"role":"user","content":"hi"}]}`, header("Nats-Expected-Stream", "ELSEWHERE")),
		"400", "not stored")
	// The server answers a refused rollup with its generic 500; the fault is
	// the request's header all the same.
	refusal(t, send(`{"id":"q7","messages":[{"role":"user","content":"hi"}]}`, header("Nats-Rollup", "all")),
		ask.CodeBadRequest, "not stored")

	// A body that is neither JSON nor msgpack is answered in JSON.
	for _, body := range []string{"hello there", "", "[1,2]", "\x92\x01\x02"} {
		reply := send(body, nil)
		refusal(t, reply, ask.CodeBadRequest, "bad request")
		if ct := reply.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("error reply to %q has Content-Type %q, want application/json", body, ct)
		}
	}

	// msgpack in, msgpack out.
	reply := send("\x81\xa2id\xa2q5", header("Content-Type", "application/msgpack"))
	if reply.Header.Get("Content-Type") != "application/msgpack" {
		t.Fatalf("error reply to a msgpack request has Content-Type %q", reply.Header.Get("Content-Type"))
	}
	refusal(t, reply, ask.CodeBadRequest, "messages is required")
	if res, _ := wire.DecodeResult(reply.Data, reply.Header); res.ID != "q5" {
		t.Fatalf("error reply id %q, want q5", res.ID)
	}

	st, err := s.js.Stream(context.Background(), wire.RequestsStream)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(context.Background()); err != nil || info.State.Msgs != 0 {
		t.Fatalf("requests stream holds %d messages (%v), want none stored", info.State.Msgs, err)
	}
	// micro counts a request once its handler returns, after the reply.
	eventually(t, "12 errors counted", func() bool { return s.stats().NumErrors == 12 })
}

// TestAskOverServerMaxPayload: a request that fits the server's max payload
// as sent, but not once its reply subject is added, is refused at once.
func TestAskOverServerMaxPayload(t *testing.T) {
	s := serve(t, 2<<20)
	limit := int(s.nc.MaxPayload())
	prefix, suffix := `{"id":"big","messages":[{"role":"user","content":"`, `"}]}`
	body := prefix + strings.Repeat("x", limit-20-len(prefix)-len(suffix)) + suffix
	reply, err := s.nc.Request(wire.AskSubject("default"), []byte(body), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	refusal(t, reply, ask.CodeTooLarge, "over the server's max payload")
}

// TestAskDuplicate: a second request with a Nats-Msg-Id the stream saw in
// its duplicate window is not stored again, and says so.
func TestAskDuplicate(t *testing.T) {
	s := serve(t, 1<<20)
	body := []byte(`{"id":"dup","messages":[{"role":"user","content":"hi"}]}`)
	first := nats.NewMsg(wire.AskSubject("default"))
	first.Reply = s.nc.NewRespInbox()
	first.Data = body
	first.Header.Set(wire.HeaderMsgID, "dup")
	if err := s.nc.PublishMsg(first); err != nil {
		t.Fatal(err)
	}
	s.stored()
	again := nats.NewMsg(wire.AskSubject("default"))
	again.Data = body
	again.Header.Set(wire.HeaderMsgID, "dup")
	reply, err := s.nc.RequestMsg(again, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	refusal(t, reply, ask.CodeDuplicate, "duplicate")
}

// TestAskWithoutStream: with no stream to store in, the requester hears so
// at once instead of waiting for an answer that cannot come.
func TestAskWithoutStream(t *testing.T) {
	s := serve(t, 1<<20)
	if err := s.js.DeleteStream(context.Background(), wire.RequestsStream); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	reply, err := s.nc.Request(wire.AskSubject("default"), []byte(`{"messages":[{"role":"user","content":"hi"}]}`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("the error reply took %s", took)
	}
	refusal(t, reply, ask.CodeUnavailable, "no stream takes detour.requests.default")
}

// TestAskToAFullQueue: a request to a chain whose requests stream is full
// (DETOUR_REQUESTS_MAX_BYTES of requests wait for processors) is refused
// at once, saying so, rather than with the server's bare words.
func TestAskToAFullQueue(t *testing.T) {
	s := serve(t, 1<<20, func(topo *topology.Streams) { topo.RequestsMaxBytes = 64 << 10 })
	// Large requests first, then small ones, until not even a small one fits.
	for _, size := range []int{16 << 10, 1 << 10, 0} {
		filler := []byte(`{"messages":[{"role":"user","content":"` + strings.Repeat("x", size) + `"}]}`)
		for {
			if _, err := s.js.Publish(context.Background(), wire.RequestSubject("default"), filler); err != nil {
				break
			}
		}
	}
	reply, err := s.nc.Request(wire.AskSubject("default"), []byte(`{"id":"late","messages":[{"role":"user","content":"hi"}]}`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	refusal(t, reply, ask.CodeUnavailable, "not stored: DETOUR_REQUESTS is full: requests are refused until processors have answered some")
	refusal(t, reply, ask.CodeUnavailable, "DETOUR_REQUESTS_MAX_BYTES reached")
}

// TestServeStops: once ctx ends, Serve stops the service and returns; the
// endpoint takes no more requests.
func TestServeStops(t *testing.T) {
	s := serve(t, 1<<20)
	if err := s.stop(); err != nil {
		t.Fatalf("Serve returned %v", err)
	}
	_, err := s.nc.Request(wire.AskSubject("default"), []byte(`{"messages":[{"role":"user","content":"hi"}]}`), 5*time.Second)
	if !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("request after the stop: %v, want no responders", err)
	}
	if n := instances(t, s.nc); n != 0 {
		t.Fatalf("%d instances answer a ping after the stop", n)
	}
}

// TestServeRefusesToStart: a service that cannot start says why.
func TestServeRefusesToStart(t *testing.T) {
	srv := natstest.Start(t)
	nc, js := natstest.Connect(t, srv)
	err := ask.Serve(context.Background(), ask.Config{Conn: nc, JetStream: js, MaxPayload: 1})
	if err == nil || !strings.Contains(err.Error(), "no chains") {
		t.Fatalf("Serve with no chains: %v", err)
	}
	err = ask.Serve(context.Background(), ask.Config{Conn: nc, JetStream: js, Chains: []string{"default"}, MaxPayload: 1, Version: "v1"})
	if err == nil || !strings.Contains(err.Error(), "version") {
		t.Fatalf("Serve with a version that is not semantic: %v", err)
	}
}

func header(k, v string) nats.Header { return nats.Header{k: {v}} }

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAskNeverRepliesWhereAProcessorMayNot: the reply subject of a core
// request is the requester's to choose. One a processor may not answer on
// (an API subject, a KV key, another request's result subject, a subject
// outside DETOUR_REPLY_PREFIXES) receives nothing, not even an error reply
// the service would send with its own credentials, and the request is not
// stored for a processor, which would answer a reply_to in its body
// instead: it is dead-lettered bad_reply_subject at once, whatever else
// is right or wrong with it.
func TestAskNeverRepliesWhereAProcessorMayNot(t *testing.T) {
	s := serve(t, 1024)
	ctx := context.Background()
	js := s.js
	if _, err := js.Publish(ctx, wire.RequestSubject("default"), []byte(`{"id":"queued","messages":[{"role":"user","content":"hi"}]}`)); err != nil {
		t.Fatal(err)
	}
	subjects := []string{
		"$JS.API.STREAM.PURGE." + wire.RequestsStream,
		"$KV.detour_providers.primary.cooldown",
		wire.ResultSubject("victim"),
		wire.RequestSubject("default"),
		"_MINE.inbox", // a client's own inbox prefix, not in DETOUR_REPLY_PREFIXES
	}
	bodies := map[string]string{
		"good":        `{"id":"b0","messages":[{"role":"user","content":"hi"}]}`,
		"bad request": `{"id":"b1","messages":"hi"}`,
		"too large":   `{"id":"b2","messages":[{"role":"user","content":"` + strings.Repeat("x", 2000) + `"}]}`,
		"reply_to":    `{"id":"b3","messages":[{"role":"user","content":"hi"}],"reply_to":"_INBOX.other"}`,
	}
	heard := make(chan *nats.Msg, 64)
	for _, subject := range subjects {
		sub, err := s.nc.ChanSubscribe(subject, heard)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	if err := s.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	sent := 0
	for _, subject := range subjects {
		for _, body := range bodies {
			msg := nats.NewMsg(wire.AskSubject("default"))
			msg.Reply, msg.Data = subject, []byte(body)
			if err := s.nc.PublishMsg(msg); err != nil {
				t.Fatal(err)
			}
			sent++
		}
	}
	// micro hands one endpoint's requests to its handler in order: once a
	// later request's refusal is back, the ones before it were handled.
	reply, err := s.nc.Request(wire.AskSubject("default"), []byte(`{"messages":"last"}`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	refusal(t, reply, ask.CodeBadRequest, "messages")
	if err := s.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for len(heard) > 0 {
		m := <-heard
		t.Errorf("%s received %q (headers %v)", m.Subject, m.Data, m.Header)
	}
	requests, err := js.Stream(ctx, wire.RequestsStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := requests.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("%s holds %d requests, want the queued one alone", wire.RequestsStream, info.State.Msgs)
	}
	letters, err := deadletter.NewStore(js).List(ctx, deadletter.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(letters) != sent {
		t.Fatalf("%d dead letters, want %d", len(letters), sent)
	}
	for _, l := range letters {
		if l.Reason != deadletter.ReasonBadReplySubject || l.Chain != "default" {
			t.Errorf("dead letter %+v, want bad_reply_subject of chain default", l)
		}
	}
}
