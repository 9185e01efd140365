package providertest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	pt "github.com/detourhq/detour/chain/providertest"
)

var flavors = []pt.Flavor{pt.OpenAI, pt.Anthropic}

// body is a minimal valid request of the flavour.
func body(f pt.Flavor, model, prompt string) string {
	if f == pt.Anthropic {
		return fmt.Sprintf(`{"model":%q,"max_tokens":64,"system":"be brief","messages":[{"role":"user","content":%q}],"temperature":0.5}`, model, prompt)
	}
	return fmt.Sprintf(`{"model":%q,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":%q}],"max_tokens":64}`, model, prompt)
}

func path(f pt.Flavor) string {
	if f == pt.Anthropic {
		return "/messages"
	}
	return "/chat/completions"
}

type result struct {
	status int
	header http.Header
	body   []byte
}

func send(ctx context.Context, s *pt.Server, f pt.Flavor, payload string) (result, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+path(f), strings.NewReader(payload))
	if err != nil {
		return result{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if f == pt.Anthropic {
		req.Header.Set("x-api-key", "sk-ant-test")
		req.Header.Set("anthropic-version", "2023-06-01")
	} else {
		req.Header.Set("Authorization", "Bearer sk-test")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return result{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return result{status: resp.StatusCode, header: resp.Header, body: b}, err
}

func mustSend(t *testing.T, s *pt.Server, f pt.Flavor, payload string) result {
	t.Helper()
	r, err := send(t.Context(), s, f, payload)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	return r
}

// success checks the whole 2xx shape of the flavour and returns content and
// finish reason.
func success(t *testing.T, f pt.Flavor, model string, b []byte) (content, finish string) {
	t.Helper()
	if f == pt.Anthropic {
		var r struct {
			ID, Type, Role, Model string
			Content               []struct{ Type, Text string }
			StopReason            string `json:"stop_reason"`
			Usage                 struct {
				In  *int `json:"input_tokens"`
				Out *int `json:"output_tokens"`
			}
		}
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("decode %s: %v", b, err)
		}
		if !strings.HasPrefix(r.ID, "msg_") || r.Type != "message" || r.Role != "assistant" || r.Model != model ||
			len(r.Content) != 1 || r.Content[0].Type != "text" || r.Usage.In == nil || r.Usage.Out == nil {
			t.Fatalf("bad anthropic shape: %s", b)
		}
		return r.Content[0].Text, r.StopReason
	}
	var r struct {
		ID, Object, Model string
		Choices           []struct {
			Index        *int
			Message      struct{ Role, Content string }
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			Prompt     int `json:"prompt_tokens"`
			Completion int `json:"completion_tokens"`
			Total      int `json:"total_tokens"`
		}
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	if !strings.HasPrefix(r.ID, "chatcmpl-") || r.Object != "chat.completion" || r.Model != model ||
		len(r.Choices) != 1 || r.Choices[0].Index == nil || *r.Choices[0].Index != 0 ||
		r.Choices[0].Message.Role != "assistant" || r.Usage.Total != r.Usage.Prompt+r.Usage.Completion {
		t.Fatalf("bad openai shape: %s", b)
	}
	return r.Choices[0].Message.Content, r.Choices[0].FinishReason
}

// failure checks the flavour's error shape and returns its type.
func failure(t *testing.T, f pt.Flavor, b []byte) (typ string) {
	t.Helper()
	if f == pt.Anthropic {
		var r struct {
			Type  string
			Error struct{ Type, Message string }
		}
		if err := json.Unmarshal(b, &r); err != nil || r.Type != "error" || r.Error.Type == "" || r.Error.Message == "" {
			t.Fatalf("bad anthropic error %s (%v)", b, err)
		}
		return r.Error.Type
	}
	var r struct {
		Error *struct {
			Message, Type string
			Code          any
		}
	}
	if err := json.Unmarshal(b, &r); err != nil || r.Error == nil || r.Error.Type == "" || r.Error.Message == "" {
		t.Fatalf("bad openai error %s (%v)", b, err)
	}
	return r.Error.Type
}

func TestFlavorString(t *testing.T) {
	if pt.OpenAI.String() != "openai" || pt.Anthropic.String() != "anthropic" || pt.Flavor(9).String() != "Flavor(9)" {
		t.Fatal(pt.OpenAI, pt.Anthropic, pt.Flavor(9))
	}
}

func TestSuccessBuilders(t *testing.T) {
	type want struct{ content, finish string } // finish per flavour below
	finishes := map[string]map[pt.Flavor]string{
		"stop":   {pt.OpenAI: "stop", pt.Anthropic: "end_turn"},
		"length": {pt.OpenAI: "length", pt.Anthropic: "max_tokens"},
	}
	cases := []struct {
		name   string
		script pt.Script
		want   want
	}{
		{"OK", pt.OK(), want{"m-1 answers: ping", "stop"}},
		{"nil is OK", nil, want{"m-1 answers: ping", "stop"}},
		{"Answer", pt.Answer("fixed text"), want{"fixed text", "stop"}},
		{"Empty", pt.Empty(), want{"", "stop"}},
		{"Truncated", pt.Truncated(), want{"The answer stops in the mid", "length"}},
		{"JSON", pt.JSON(map[string]int{"a": 1}), want{`{"a":1}`, "stop"}},
		{"Slow", pt.Slow(time.Millisecond, pt.Answer("late")), want{"late", "stop"}},
		{"Reply max_tokens spelled for openai", func(int, pt.Request) pt.Reply {
			return pt.Reply{Content: "x", FinishReason: "max_tokens"}
		}, want{"x", "length"}},
	}
	for _, f := range flavors {
		for _, c := range cases {
			t.Run(f.String()+"/"+c.name, func(t *testing.T) {
				s := pt.New(f, c.script)
				defer s.Close()
				r := mustSend(t, s, f, body(f, "m-1", "ping"))
				if r.status != http.StatusOK {
					t.Fatalf("status %d: %s", r.status, r.body)
				}
				if ct := r.header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type %q", ct)
				}
				content, finish := success(t, f, "m-1", r.body)
				if content != c.want.content || finish != finishes[c.want.finish][f] {
					t.Errorf("got %q/%q, want %q/%q", content, finish, c.want.content, finishes[c.want.finish][f])
				}
			})
		}
	}
}

func TestStatusErrorTypes(t *testing.T) {
	cases := []struct {
		code              int
		openAI, anthropic string
	}{
		{529, "server_error", "overloaded_error"},
		{500, "server_error", "api_error"},
		{503, "server_error", "api_error"},
		{429, "requests", "rate_limit_error"},
		{401, "invalid_request_error", "authentication_error"},
		{403, "permission_error", "permission_error"},
		{404, "invalid_request_error", "not_found_error"},
		{400, "invalid_request_error", "invalid_request_error"},
		{422, "invalid_request_error", "invalid_request_error"},
		{413, "invalid_request_error", "request_too_large"},
	}
	for _, f := range flavors {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%d", f, c.code), func(t *testing.T) {
				s := pt.New(f, pt.Status(c.code))
				defer s.Close()
				r := mustSend(t, s, f, body(f, "m", "hi"))
				if r.status != c.code {
					t.Fatalf("status %d, want %d", r.status, c.code)
				}
				want := c.openAI
				if f == pt.Anthropic {
					want = c.anthropic
				}
				if got := failure(t, f, r.body); got != want {
					t.Errorf("error type %q, want %q", got, want)
				}
			})
		}
	}
}

func TestRateLimited(t *testing.T) {
	date := time.Now().Add(time.Minute).UTC().Format(http.TimeFormat)
	for _, f := range flavors {
		for _, v := range []string{"7", date} {
			s := pt.New(f, pt.RateLimited(v))
			r := mustSend(t, s, f, body(f, "m", "hi"))
			s.Close()
			if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != v {
				t.Errorf("%s: status %d Retry-After %q, want 429 %q", f, r.status, r.header.Get("Retry-After"), v)
			}
			failure(t, f, r.body)
		}
	}
}

func TestRawBodyAndMalformed(t *testing.T) {
	for _, f := range flavors {
		s := pt.New(f, pt.Malformed())
		r := mustSend(t, s, f, body(f, "m", "hi"))
		if r.status != http.StatusOK || json.Valid(r.body) || len(r.body) == 0 {
			t.Errorf("%s Malformed: %d %s", f, r.status, r.body)
		}
		// The non-standard {"error":"text"} bodies of some OpenAI-compatible servers.
		s.SetScript(func(int, pt.Request) pt.Reply {
			return pt.Reply{Status: 502, RawBody: `{"error":"upstream down"}`, Header: http.Header{"Content-Type": {"text/plain"}}}
		})
		r = mustSend(t, s, f, body(f, "m", "hi"))
		s.Close()
		if r.status != 502 || string(r.body) != `{"error":"upstream down"}` || r.header.Get("Content-Type") != "text/plain" {
			t.Errorf("%s RawBody: %d %q %s", f, r.status, r.header.Get("Content-Type"), r.body)
		}
	}
}

func TestSlowWaits(t *testing.T) {
	s := pt.New(pt.OpenAI, pt.Slow(150*time.Millisecond, nil))
	defer s.Close()
	start := time.Now()
	r := mustSend(t, s, pt.OpenAI, body(pt.OpenAI, "m", "hi"))
	if el := time.Since(start); el < 150*time.Millisecond || r.status != 200 {
		t.Fatalf("answered %d after %v", r.status, el)
	}
}

func TestUnknownPathAndBadBody(t *testing.T) {
	for _, f := range flavors {
		s := pt.New(f, nil)
		resp, err := http.Post(s.URL+"/nowhere", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("%s unknown path: %d", f, resp.StatusCode)
		}
		failure(t, f, b)

		resp, err = http.Get(s.URL + path(f))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s GET: %d", f, resp.StatusCode)
		}
		if s.Requests() != 0 {
			t.Errorf("%s: unknown path and GET counted: %d", f, s.Requests())
		}

		for _, bad := range []string{`not json`, `{"model":"m","messages":[{"role":"user","content":5}]}`, `{"model":"m","messages":[]}`, `{"messages":[{"role":"user","content":"x"}],"max_tokens":1}`} {
			r := mustSend(t, s, f, bad)
			if r.status != 400 {
				t.Errorf("%s %s: %d", f, bad, r.status)
			}
			if typ := failure(t, f, r.body); typ != "invalid_request_error" {
				t.Errorf("%s %s: type %q", f, bad, typ)
			}
		}
		if s.Requests() != 4 {
			t.Errorf("%s: Requests %d, want 4 (refused bodies count on arrival)", f, s.Requests())
		}
		s.Close()
	}
	// Anthropic requires max_tokens; OpenAI does not.
	s := pt.New(pt.Anthropic, nil)
	defer s.Close()
	if r := mustSend(t, s, pt.Anthropic, `{"model":"m","messages":[{"role":"user","content":"x"}]}`); r.status != 400 {
		t.Errorf("anthropic without max_tokens: %d", r.status)
	}
}

func TestContentBlocks(t *testing.T) {
	s := pt.New(pt.Anthropic, nil)
	defer s.Close()
	r := mustSend(t, s, pt.Anthropic, `{"model":"m","max_tokens":5,"system":[{"type":"text","text":"sys"}],"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`)
	if content, _ := success(t, pt.Anthropic, "m", r.body); content != "m answers: ab" {
		t.Errorf("content %q", content)
	}
	if got := s.Received()[0].System; got != "sys" {
		t.Errorf("system %q", got)
	}
}

// TestKeepReceivedBoundsWhatIsKept: a server told to keep n requests keeps
// the last n, in order, whether told before or after they came, and still
// counts every one; n = 0 keeps none, a negative n every one again.
func TestKeepReceivedBoundsWhatIsKept(t *testing.T) {
	const untold = -2 // KeepReceived not called
	for _, tt := range []struct {
		name                string
		before, after, sent int // KeepReceived before the first request and after the third
		want                []string
	}{
		{"two, told first", 2, untold, 5, []string{"m-3", "m-4"}},
		{"none, told first", 0, untold, 5, nil},
		{"one, told after three", untold, 1, 5, []string{"m-4"}},
		{"every one again, from none", 0, -1, 5, []string{"m-3", "m-4"}},
		{"every one again, from two", 2, -1, 5, []string{"m-1", "m-2", "m-3", "m-4"}},
	} {
		s := pt.New(pt.OpenAI, nil)
		if tt.before != untold {
			s.KeepReceived(tt.before)
		}
		for i := range tt.sent {
			if i == 3 && tt.after != untold {
				s.KeepReceived(tt.after)
				if kept := len(s.Received()); tt.after >= 0 && kept != min(tt.after, 3) {
					t.Errorf("%s: %d kept at once, want %d", tt.name, kept, min(tt.after, 3))
				}
			}
			mustSend(t, s, pt.OpenAI, body(pt.OpenAI, fmt.Sprintf("m-%d", i), "hi"))
		}
		got := s.Received()
		s.Close()
		var models []string
		for _, r := range got {
			models = append(models, r.Model)
		}
		if !slices.Equal(models, tt.want) || s.Requests() != tt.sent {
			t.Errorf("%s: kept %v, want %v; Requests %d, want %d", tt.name, models, tt.want, s.Requests(), tt.sent)
		}
	}
}

func TestReceivedRecordsRequests(t *testing.T) {
	for _, f := range flavors {
		s := pt.New(f, nil)
		mustSend(t, s, f, body(f, "m-a", "first"))
		mustSend(t, s, f, body(f, "m-b", "second"))
		got := s.Received()
		s.Close()
		if len(got) != 2 || got[0].Model != "m-a" || got[1].Model != "m-b" || got[0].MaxTokens != 64 {
			t.Fatalf("%s: %+v", f, got)
		}
		last := got[1].Messages[len(got[1].Messages)-1]
		if last != (pt.Message{Role: "user", Content: "second"}) {
			t.Errorf("%s: last message %+v", f, last)
		}
		if string(got[1].Body) != body(f, "m-b", "second") {
			t.Errorf("%s: body %s, want it as sent", f, got[1].Body)
		}
		if f == pt.Anthropic {
			if got[0].Header.Get("X-Api-Key") != "sk-ant-test" || got[0].Header.Get("anthropic-version") != "2023-06-01" {
				t.Errorf("headers %v", got[0].Header)
			}
			if got[0].System != "be brief" || got[0].Temperature == nil || *got[0].Temperature != 0.5 {
				t.Errorf("system %q temperature %v", got[0].System, got[0].Temperature)
			}
		} else {
			if got[0].Header.Get("Authorization") != "Bearer sk-test" || got[0].Temperature != nil {
				t.Errorf("headers %v temperature %v", got[0].Header, got[0].Temperature)
			}
			if got[0].Messages[0].Role != "system" || got[0].System != "" {
				t.Errorf("openai system prompt should stay in messages: %+v", got[0])
			}
		}
		// Received hands out copies.
		got[0].Header.Set("X-Api-Key", "changed")
		got[0].Messages[0].Content = "changed"
		got[0].Body[0] = 'X'
		again := s.Received()
		if again[0].Header.Get("X-Api-Key") == "changed" || again[0].Messages[0].Content == "changed" || again[0].Body[0] == 'X' {
			t.Errorf("%s: Received shares memory with the server", f)
		}
	}
}

func TestConcurrentCounting(t *testing.T) {
	const clients = 40
	var mu sync.Mutex
	seen := map[int]bool{}
	script := func(n int, req pt.Request) pt.Reply {
		mu.Lock()
		seen[n] = true
		mu.Unlock()
		return pt.Reply{Content: "ok", Delay: 20 * time.Millisecond}
	}
	s := pt.New(pt.OpenAI, script)
	defer s.Close()
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		wg.Go(func() {
			if i%2 == 0 {
				s.SetScript(script) // swapping scripts while serving is race-free
			}
			r, err := send(context.Background(), s, pt.OpenAI, body(pt.OpenAI, "m", "hi"))
			if err == nil && r.status != 200 {
				err = fmt.Errorf("status %d", r.status)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if s.Requests() != clients || len(s.Received()) != clients || s.InFlight() != 0 {
		t.Fatalf("Requests %d Received %d InFlight %d", s.Requests(), len(s.Received()), s.InFlight())
	}
	for n := 1; n <= clients; n++ {
		if !seen[n] {
			t.Fatalf("request number %d never given to the script: %v", n, seen)
		}
	}
}

// waitFor polls cond for up to 2s: the server's side of a call ends
// asynchronously to the client's.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestHangAndDelayEndOnClientCancel(t *testing.T) {
	for name, script := range map[string]pt.Script{"Hang": pt.Hang(), "Slow": pt.Slow(time.Hour, nil)} {
		for _, f := range flavors {
			t.Run(name+"/"+f.String(), func(t *testing.T) {
				s := pt.New(f, script)
				defer s.Close()
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error, 1)
				go func() {
					_, err := send(ctx, s, f, body(f, "m", "hi"))
					done <- err
				}()
				waitFor(t, "the request to arrive", func() bool { return s.InFlight() == 1 })
				if s.Requests() != 1 {
					t.Errorf("Requests %d before the reply, want 1", s.Requests())
				}
				cancel()
				select {
				case err := <-done:
					if !errors.Is(err, context.Canceled) {
						t.Errorf("client error %v, want context.Canceled", err)
					}
				case <-time.After(2 * time.Second):
					t.Fatal("client still waiting after cancel")
				}
				waitFor(t, "the handler to return", func() bool { return s.InFlight() == 0 })
			})
		}
	}
}

func TestHangEndsOnClose(t *testing.T) {
	for _, f := range flavors {
		s := pt.New(f, pt.Hang())
		done := make(chan error, 1)
		go func() {
			_, err := send(context.Background(), s, f, body(f, "m", "hi"))
			done <- err
		}()
		waitFor(t, "the request to arrive", func() bool { return s.InFlight() == 1 })
		closed := make(chan struct{})
		go func() { s.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(2 * time.Second):
			t.Fatalf("%s: Close blocked on a hanging handler", f)
		}
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s: client got an answer from a closed server", f)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("%s: client still waiting after Close", f)
		}
		s.Close() // a second Close is harmless
	}
}

func TestFlakyDeterministic(t *testing.T) {
	outcomes := func(seed int64) string {
		script := pt.Flaky(0.3, seed, nil, nil)
		var b strings.Builder
		for n := 1; n <= 1000; n++ {
			if script(n, pt.Request{Model: "m"}).Status == 500 {
				b.WriteByte('x')
			} else {
				b.WriteByte('.')
			}
		}
		return b.String()
	}
	a, again, other := outcomes(42), outcomes(42), outcomes(43)
	if a != again {
		t.Fatal("same seed gave different outcomes")
	}
	if a == other {
		t.Fatal("different seeds gave the same outcomes")
	}
	if fails := strings.Count(a, "x"); fails < 250 || fails > 350 {
		t.Fatalf("%d failures of 1000 at ratio 0.3", fails)
	}
	for n := 1; n <= 100; n++ {
		if pt.Flaky(0, 1, nil, nil)(n, pt.Request{}).Status != 0 || pt.Flaky(1, 1, nil, nil)(n, pt.Request{}).Status != 500 {
			t.Fatal("ratio 0 must never fail and ratio 1 always")
		}
	}

	// Over HTTP the outcome of request n is the same as the pure script's.
	s := pt.New(pt.Anthropic, pt.Flaky(0.3, 42, pt.Status(529), pt.Answer("fine")))
	defer s.Close()
	for n := 1; n <= 20; n++ {
		r := mustSend(t, s, pt.Anthropic, body(pt.Anthropic, "m", "hi"))
		if want := map[byte]int{'x': 529, '.': 200}[a[n-1]]; r.status != want {
			t.Fatalf("request %d: status %d, want %d", n, r.status, want)
		}
	}
}

func TestComposition(t *testing.T) {
	req := pt.Request{Model: "m", Messages: []pt.Message{{Role: "user", Content: "q"}}}
	statuses := func(s pt.Script, count int) []int {
		var out []int
		for n := 1; n <= count; n++ {
			out = append(out, s(n, req).Status)
		}
		return out
	}
	check := func(name string, got []int, want ...int) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
	check("FailFirst", statuses(pt.FailFirst(2, pt.Status(503), pt.OK()), 4), 503, 503, 0, 0)
	check("FailFirst nil", statuses(pt.FailFirst(1, nil, nil), 2), 500, 0)
	check("Sequence", statuses(pt.Sequence(pt.Status(500), pt.Status(429), pt.OK()), 5), 500, 429, 0, 0, 0)
	check("Sequence last repeats", statuses(pt.Sequence(pt.OK(), pt.Status(401)), 4), 0, 401, 401, 401)
	check("Sequence empty", statuses(pt.Sequence(), 2), 0, 0)
	check("Until future", statuses(pt.Until(time.Now().Add(time.Hour), pt.Status(503), pt.OK()), 2), 503, 503)
	check("Until past", statuses(pt.Until(time.Now().Add(-time.Second), pt.Status(503), pt.OK()), 2), 0, 0)

	if r := pt.Slow(time.Second, pt.Slow(time.Second, pt.Status(500)))(1, req); r.Delay != 2*time.Second || r.Status != 500 {
		t.Errorf("nested Slow: %+v", r)
	}
	if !pt.Hang()(1, req).Hang {
		t.Error("Hang does not hang")
	}
	if got := pt.OK()(1, req).Content; got != "m answers: q" {
		t.Errorf("OK content %q", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("JSON of a channel should panic when built")
		}
	}()
	pt.JSON(make(chan int))
}

func TestSetScriptWhileServing(t *testing.T) {
	s := pt.New(pt.OpenAI, pt.Status(503))
	defer s.Close()
	if r := mustSend(t, s, pt.OpenAI, body(pt.OpenAI, "m", "hi")); r.status != 503 {
		t.Fatalf("status %d", r.status)
	}
	s.SetScript(pt.Answer("recovered"))
	r := mustSend(t, s, pt.OpenAI, body(pt.OpenAI, "m", "hi"))
	if content, _ := success(t, pt.OpenAI, "m", r.body); content != "recovered" {
		t.Fatalf("content %q", content)
	}
	s.SetScript(nil)
	r = mustSend(t, s, pt.OpenAI, body(pt.OpenAI, "m", "hi"))
	if content, _ := success(t, pt.OpenAI, "m", r.body); content != "m answers: hi" {
		t.Fatalf("content %q", content)
	}
}
