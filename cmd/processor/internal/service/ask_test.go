package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/client"
	"github.com/detourhq/detour/cmd/processor/internal/ask"
	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/wire"
)

const askChains = `
providers:
  - {name: template, type: rules, default_reply: "template answer"}
chains:
  default: [template]
  other: [template]
`

// startAskers runs two processors and waits until both serve the micro
// service.
func startAskers(t *testing.T, h *harness) {
	t.Helper()
	file := parseChainFile(t, askChains)
	settings := testSettings()
	settings.MaxPayload = 4096
	h.startProcessor(file, settings)
	h.startProcessor(file, settings)
	eventually(t, 10*time.Second, "two instances of the service", func() bool { return len(askInstances(t, h.nc)) == 2 })
}

// askInstances pings the service "detour" and returns the ids of the
// instances that answer within a short window.
func askInstances(t *testing.T, nc *nats.Conn) []string {
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
	var ids []string
	for {
		m, err := sub.NextMsg(200 * time.Millisecond)
		if err != nil {
			return ids
		}
		var ping micro.Ping
		if err := json.Unmarshal(m.Data, &ping); err != nil {
			t.Fatalf("ping reply %q: %v", m.Data, err)
		}
		ids = append(ids, ping.ID)
	}
}

// TestAskAnswersWithTheResult: a core request to detour.ask.<chain> is
// answered with the annotated result, in the request's encoding, by
// whichever processor takes the stored request; the result is stored too.
func TestAskAnswersWithTheResult(t *testing.T) {
	h := newHarness(t)
	startAskers(t, h)

	t.Run("json", func(t *testing.T) {
		msg := nats.NewMsg(wire.AskSubject("default"))
		msg.Data = []byte(`{"id":"ask-json","messages":[{"role":"user","content":"hi"}],"metadata":{"tenant":"acme"}}`)
		reply, err := h.nc.RequestMsg(msg, 15*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		res := answered(t, reply, "application/json")
		if res.ID != "ask-json" || res.Metadata["tenant"] != "acme" {
			t.Fatalf("result %+v, want id ask-json with its metadata", res)
		}
		if stored, _ := h.waitResult("ask-json", 5*time.Second); stored.Content != res.Content {
			t.Fatalf("stored result %+v, want the one replied", stored)
		}
	})
	t.Run("msgpack", func(t *testing.T) {
		body, err := msgpack.Marshal(wire.Request{ID: "ask-msgpack", Messages: []chain.Message{{Role: "user", Content: "hi"}}})
		if err != nil {
			t.Fatal(err)
		}
		msg := nats.NewMsg(wire.AskSubject("other"))
		msg.Data = body
		msg.Header.Set("Content-Type", "application/msgpack")
		reply, err := h.nc.RequestMsg(msg, 15*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if res := answered(t, reply, "application/msgpack"); res.ID != "ask-msgpack" {
			t.Fatalf("result %+v, want id ask-msgpack", res)
		}
	})
	t.Run("no id", func(t *testing.T) {
		// A unique id, not the request's sequence.
		reply, err := h.nc.Request(wire.AskSubject("default"), []byte(`{"messages":[{"role":"user","content":"hi"}]}`), 15*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		res := answered(t, reply, "application/json")
		if len(res.ID) != 22 || reply.Header.Get(wire.HeaderRequestID) != res.ID {
			t.Fatalf("result id %q (header %q), want a NUID", res.ID, reply.Header.Get(wire.HeaderRequestID))
		}
	})
}

// answered decodes reply as the template's ok result.
func answered(t *testing.T, reply *nats.Msg, contentType string) chain.Result {
	t.Helper()
	if code := reply.Header.Get(micro.ErrorCodeHeader); code != "" {
		t.Fatalf("error reply %s: %s", code, reply.Header.Get(micro.ErrorHeader))
	}
	if got := reply.Header.Get("Content-Type"); got != contentType {
		t.Fatalf("reply Content-Type %q, want %q", got, contentType)
	}
	res, err := wire.DecodeResult(reply.Data, reply.Header)
	if err != nil {
		t.Fatalf("reply %q: %v", reply.Data, err)
	}
	if res.Status != chain.StatusOK || res.Content != "template answer" || res.Provider != "template" ||
		reply.Header.Get(wire.HeaderStatus) != "ok" || reply.Header.Get(wire.HeaderProvider) != "template" {
		t.Fatalf("reply %+v with headers %v, want the template's ok result", res, reply.Header)
	}
	return res
}

// TestAskRefusedAtOnce: a request that cannot be stored gets micro's error
// reply at once, from either processor, and nothing is dead-lettered. (A
// requests stream that is missing is answered the same way: see
// internal/ask; here the processors would race to put it back.)
func TestAskRefusedAtOnce(t *testing.T) {
	h := newHarness(t)
	startAskers(t, h)
	for _, tc := range []struct {
		name, body, code, says string
	}{
		{"too large", `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`, ask.CodeTooLarge, "exceeds DETOUR_MAX_PAYLOAD 4096"},
		{"bad request", `{"id":"bad","messages":[{"role":"user","content":"hi"}],"temperature":-1}`, ask.CodeBadRequest, "temperature"},
		{"reply_to", `{"id":"elsewhere","messages":[{"role":"user","content":"hi"}],"reply_to":"_INBOX.elsewhere"}`, ask.CodeBadRequest, "reply_to"},
		// JetStream refuses to store it: the request expects another stream.
		{"refused by the stream", `{"id":"expects","messages":[{"role":"user","content":"hi"}]}`, "400", "not stored"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := nats.NewMsg(wire.AskSubject("default"))
			msg.Data = []byte(tc.body)
			if tc.name == "refused by the stream" {
				msg.Header.Set(jetstream.ExpectedStreamHeader, "ELSEWHERE")
			}
			start := time.Now()
			reply, err := h.nc.RequestMsg(msg, 15*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Fatalf("the error reply took %s", took)
			}
			refused(t, reply, tc.code, tc.says)
		})
	}

	if dl := h.deadLetters(); len(dl) != 0 {
		t.Fatalf("%d dead letters, want none: a refused request is not stored", len(dl))
	}
}

func refused(t *testing.T, reply *nats.Msg, code, says string) {
	t.Helper()
	if got := reply.Header.Get(micro.ErrorCodeHeader); got != code {
		t.Fatalf("reply code %q (%q, body %q), want %q", got, reply.Header.Get(micro.ErrorHeader), reply.Data, code)
	}
	if desc := reply.Header.Get(micro.ErrorHeader); !strings.Contains(desc, says) {
		t.Fatalf("error %q, want it to say %q", desc, says)
	}
	res, err := wire.DecodeResult(reply.Data, reply.Header)
	if err != nil || res.Status != chain.StatusFailed {
		t.Fatalf("error reply body %q (%v), want a failed result", reply.Data, err)
	}
}

// TestNATSCLI: the real nats CLI asks for an answer and discovers the
// processors.
func TestNATSCLI(t *testing.T) {
	cli := natstest.NATSCLI(t)
	h := newHarness(t)
	startAskers(t, h)
	url := h.srv.ClientURL()
	home := t.TempDir() // no contexts of the user's
	nats := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, cli, append([]string{"--server", url}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "NATS_CONTEXT=", "NATS_TIMEOUT=30s")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("nats %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}

	out := nats("request", "detour.ask.default", `{"messages":[{"role":"user","content":"hi"}]}`)
	t.Logf("nats request:\n%s", out)
	for _, want := range []string{`"status":"ok"`, `"content":"template answer"`, `"provider":"template"`, "Detour-Provider: template"} {
		if !strings.Contains(out, want) {
			t.Fatalf("nats request printed\n%s\nwant %s in it", out, want)
		}
	}

	out = nats("request", "detour.ask.default", `{"messages":[]}`)
	t.Logf("nats request, refused:\n%s", out)
	for _, want := range []string{"Nats-Service-Error-Code: 400", "Nats-Service-Error: bad request: messages is required", `"status":"failed"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("nats request printed\n%s\nwant %s in it", out, want)
		}
	}

	out = nats("micro", "ls")
	t.Logf("nats micro ls:\n%s", out)
	if !strings.Contains(out, ask.ServiceName) {
		t.Fatalf("nats micro ls printed\n%s\nwant the service %s", out, ask.ServiceName)
	}
	out = nats("micro", "ls", "--json")
	var listed []micro.Info
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatalf("nats micro ls --json printed\n%s\n%v", out, err)
	}
	ids := map[string]bool{}
	for _, svc := range listed {
		if svc.Name == ask.ServiceName {
			ids[svc.ID] = true
		}
	}
	if len(ids) != 2 {
		t.Fatalf("nats micro ls --json listed %d instances of %s, want the two processors:\n%s", len(ids), ask.ServiceName, out)
	}

	out = nats("micro", "info", ask.ServiceName)
	t.Logf("nats micro info:\n%s", out)
	for _, want := range []string{"detour.ask.default", "detour.ask.other"} {
		if !strings.Contains(out, want) {
			t.Fatalf("nats micro info printed\n%s\nwant %s in it", out, want)
		}
	}
	out = nats("micro", "stats", ask.ServiceName)
	t.Logf("nats micro stats:\n%s", out)
}

// TestAskStopsBeforeTheDrain: once Run's ctx ends, the processor leaves the
// service at once, so no new request is taken while it drains, and a
// request asked before still gets its answer from the drain.
func TestAskStopsBeforeTheDrain(t *testing.T) {
	const callTime = 3 * time.Second
	slow := providertest.New(providertest.OpenAI, providertest.Slow(callTime, providertest.OK()))
	defer slow.Close()
	h := newHarness(t)
	file := parseChainFile(t, fmt.Sprintf(`
providers:
  - {name: slow, type: openai, base_url: %s, model: m-slow, timeout: 10s}
chains:
  default: [slow]
`, slow.URL))
	settings := testSettings()
	settings.ShutdownTimeout = 2 * callTime
	p := h.assemble(file, settings, false)
	p.run()
	eventually(t, 10*time.Second, "the service", func() bool { return len(askInstances(t, h.nc)) == 1 })

	inbox := h.nc.NewRespInbox()
	replies, err := h.nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"id":"asked-before","messages":[{"role":"user","content":"take your time"}]}`)
	if err := h.nc.PublishRequest(wire.AskSubject("default"), inbox, body); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the call in flight", func() bool { return slow.InFlight() == 1 })
	stopped := make(chan struct{})
	go func() { // ends once Run has returned
		defer close(stopped)
		p.stop()
	}()
	eventually(t, callTime/2, "the service gone while the call is in flight", func() bool { return len(askInstances(t, h.nc)) == 0 })
	if _, err := h.nc.Request(wire.AskSubject("default"), body, 5*time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("a request while draining: %v, want no responders", err)
	}
	if slow.InFlight() != 1 {
		t.Fatal("the call ended before the service was gone; the test proves nothing")
	}
	reply, err := replies.NextMsg(2 * callTime)
	if err != nil {
		t.Fatalf("no answer to the request asked before the stop: %v", err)
	}
	if res, err := wire.DecodeResult(reply.Data, reply.Header); err != nil || res.Status != chain.StatusOK || res.ID != "asked-before" {
		t.Fatalf("answer %+v (%v), want the ok result of asked-before", res, err)
	}
	<-stopped
}

// TestClientAsk: the Go client's Ask against the processors' endpoint. The
// reply is the result; a request the endpoint refuses is an *AskError with
// its code, its reason as the sentinel of wire, and the failed result the
// reply carries; the same id asked again within the duplicate window is
// refused 409; a chain nobody serves is no responders.
func TestClientAsk(t *testing.T) {
	h := newHarness(t)
	startAskers(t, h)
	c, err := client.New(h.nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	req := wire.Request{ID: "client-ask", Messages: []chain.Message{{Role: "user", Content: "hi"}}, Metadata: chain.Metadata{"tenant": "acme"}}
	res, err := c.Ask(ctx, "default", req)
	if err != nil || res.ID != "client-ask" || res.Status != chain.StatusOK || res.Content != "template answer" || res.Metadata["tenant"] != "acme" {
		t.Fatalf("Ask: %+v, %v; want the template's ok result with the metadata", res, err)
	}
	if stored, _ := h.waitResult("client-ask", 5*time.Second); stored.Content != res.Content {
		t.Fatalf("stored result %+v, want the one replied", stored)
	}

	var refused *client.AskError
	_, err = c.Ask(ctx, "default", req)
	if !errors.As(err, &refused) || refused.Code != ask.CodeDuplicate {
		t.Fatalf("Ask again: %v; want an AskError %s", err, ask.CodeDuplicate)
	}

	_, err = c.Ask(ctx, "default", wire.Request{ID: "no-messages"})
	if !errors.As(err, &refused) || refused.Code != ask.CodeBadRequest || !errors.Is(err, wire.ErrBadRequest) ||
		refused.Result.ID != "no-messages" || refused.Result.Status != chain.StatusFailed || refused.Result.Error != refused.Description {
		t.Fatalf("Ask without messages: %#v; want an AskError %s carrying the failed result", err, ask.CodeBadRequest)
	}

	if _, err := c.Ask(ctx, "nosuch", req); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("Ask an unknown chain: %v; want no responders", err)
	}
}
