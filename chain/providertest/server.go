package providertest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samber/lo"

	"github.com/detourhq/detour/internal/wait"
)

// maxBody bounds a request body; real services refuse far smaller ones.
const maxBody = 8 << 20

// errClosed ends a wait because Server.Close was called.
var errClosed = errors.New("providertest: server closed")

// Server is a fake LLM provider listening on 127.0.0.1.
type Server struct {
	// URL is the base URL to put in a chain file: the server's root URL
	// followed by "/v1".
	URL string

	flavor   Flavor
	srv      *httptest.Server
	script   atomic.Pointer[Script]
	requests atomic.Int64
	inFlight atomic.Int64

	mu       sync.Mutex
	received []Request
	keep     int // how many of the last requests received keeps; -1: all

	// closed ends with Close so that handlers waiting in Hang or Delay
	// return; httptest.Server.Close waits for active handlers and would
	// otherwise block forever.
	closed context.Context
	close  context.CancelFunc
}

// New starts a server of the given flavour at once, on a random port of
// 127.0.0.1, answering with script (nil means OK). Close it when done.
func New(flavor Flavor, script Script) *Server {
	s := &Server{flavor: flavor, keep: -1}
	s.closed, s.close = context.WithCancel(context.Background())
	s.SetScript(script)
	s.srv = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	s.URL = s.srv.URL + "/v1"
	return s
}

// Close drops every request still waiting (Hang or Delay), so their clients
// see the connection close, then stops the server. It is safe to call more
// than once.
func (s *Server) Close() {
	s.close()
	s.srv.Close()
}

// SetScript replaces the script for the requests that arrive from now on;
// it is safe while serving. The request number n is not reset. nil means OK.
func (s *Server) SetScript(script Script) {
	script = orOK(script)
	s.script.Store(&script)
}

// Requests is the number of POSTs received on the completion endpoint,
// counted on arrival (before any Delay, and including ones refused with 400).
func (s *Server) Requests() int { return int(s.requests.Load()) }

// InFlight is the number of completion requests being handled right now,
// including those hanging or delayed.
func (s *Server) InFlight() int { return int(s.inFlight.Load()) }

// KeepReceived makes the server keep only the last n requests for Received
// (0: none), dropping older ones now and from then on; a negative n keeps
// every one again, as a new server does. Requests still counts them all. A
// long-running server (the service's -demo) should bound them.
func (s *Server) KeepReceived(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keep = max(n, -1)
	s.trim()
}

// Received returns copies of the requests whose body decoded, in order of
// arrival: every one, or the last of them that KeepReceived allows.
func (s *Server) Received() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return lo.Map(s.received, func(r Request, _ int) Request { return r.clone() })
}

// remember keeps a copy of req for Received, within KeepReceived's bound.
func (s *Server) remember(req Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.received = append(s.received, req.clone())
	s.trim()
}

// trim drops the oldest requests beyond keep, shifting within the slice so
// that its array stays bounded.
func (s *Server) trim() {
	if s.keep >= 0 && len(s.received) > s.keep {
		s.received = slices.Delete(s.received, 0, len(s.received)-s.keep)
	}
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	refuse := func(status int, message string) {
		s.write(w, 0, Request{}, Reply{Status: status, ErrorMessage: "providertest: " + message})
	}
	if r.URL.Path != s.flavor.completionPath() {
		refuse(http.StatusNotFound, fmt.Sprintf("no %s endpoint at %s", s.flavor, r.URL.Path))
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		refuse(http.StatusMethodNotAllowed, "use POST")
		return
	}
	arrived := time.Now()
	n := int(s.requests.Add(1))
	s.inFlight.Add(1)
	defer s.inFlight.Add(-1)

	// Reading the whole body also lets net/http notice a client that goes
	// away, which ends r.Context() for Hang and Delay.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		refuse(http.StatusBadRequest, "reading body: "+err.Error())
		return
	}
	req, err := decodeRequest(body, r.Header)
	if err != nil {
		refuse(http.StatusBadRequest, err.Error())
		return
	}
	req.Flavor, req.At, req.Query = s.flavor, arrived, r.URL.Query()
	s.remember(req)
	if err := validate(s.flavor, req); err != nil {
		refuse(http.StatusBadRequest, err.Error())
		return
	}

	reply := (*s.script.Load())(n, req)
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	defer context.AfterFunc(s.closed, func() { cancel(errClosed) })()
	if reply.Hang {
		<-ctx.Done()
	}
	if err := wait.Sleep(ctx, reply.Delay); errors.Is(err, errClosed) {
		// Drop the connection without an answer, as a dying server would;
		// net/http recovers this panic silently.
		panic(http.ErrAbortHandler)
	} else if err != nil {
		return // the client went away: nobody to answer
	}
	s.write(w, n, req, reply)
}

func (s *Server) write(w http.ResponseWriter, n int, req Request, reply Reply) {
	status := cmp.Or(reply.Status, http.StatusOK)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	for k, vs := range reply.Header {
		h[http.CanonicalHeaderKey(k)] = slices.Clone(vs)
	}
	var body []byte
	switch {
	case reply.RawBody != "":
		body = []byte(reply.RawBody)
	case status >= 300:
		body = s.flavor.errorDocument(status, reply)
	case reply.ErrorStatus != 0:
		body = s.flavor.errorDocument(reply.ErrorStatus, reply)
	default:
		prompt := tokens(req.System) + lo.SumBy(req.Messages, func(m Message) int { return tokens(m.Content) })
		completion := tokens(reply.Content, reply.Refusal)
		if reply.Usage != nil {
			prompt, completion = reply.Usage.Prompt, reply.Usage.Completion
		}
		body = s.flavor.successBody(n, cmp.Or(reply.Model, req.Model), reply, prompt, completion)
	}
	w.WriteHeader(status)
	_, _ = w.Write(body) // a client that left cannot be told
}
