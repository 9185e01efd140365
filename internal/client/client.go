package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/stream"
)

// Client sends requests over one NATS connection.
type Client struct {
	nc *nats.Conn
	js jetstream.JetStream
}

// New returns a Client on nc.
func New(nc *nats.Conn) (*Client, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	return &Client{nc: nc, js: js}, nil
}

// Outcome is what became of one request: its result, or why none arrived.
type Outcome struct {
	ID     string
	Result chain.Result
	Err    error
}

// ErrNoResult is reported for a request whose result did not arrive in time.
var ErrNoResult = errors.New("no result before the timeout")

// Run publishes reqs to chainName and, when wait is set, waits until every
// result has arrived or ctx ends. Requests without an id get a unique one;
// each is published with Nats-Msg-Id so a retried publish is not queued twice.
func (c *Client) Run(ctx context.Context, chainName string, reqs []stream.Request, wait bool) ([]Outcome, error) {
	inbox := c.nc.NewInbox()
	index := make(map[string]int, len(reqs))
	outcomes := make([]Outcome, len(reqs))
	var mu sync.Mutex
	pending := len(reqs)
	done := make(chan struct{})
	deliver := func(id string, res chain.Result) {
		mu.Lock()
		defer mu.Unlock()
		i, ok := index[id]
		if !ok || outcomes[i].Result.Status != "" {
			return
		}
		outcomes[i].Result = res
		if pending--; pending == 0 {
			close(done)
		}
	}
	if wait {
		sub, err := c.nc.Subscribe(inbox+".>", func(m *nats.Msg) {
			if res, err := stream.DecodeResult(m.Data, m.Header); err == nil {
				deliver(res.ID, res)
			}
		})
		if err != nil {
			return nil, fmt.Errorf("client: subscribing to %s: %w", inbox, err)
		}
		defer sub.Unsubscribe()
	}
	for i := range reqs {
		r := &reqs[i]
		if r.ID == "" {
			r.ID = nuid.Next()
		}
		if wait && r.ReplyTo == "" {
			r.ReplyTo = inbox + "." + r.ID
		}
		mu.Lock()
		index[r.ID] = i
		outcomes[i].ID = r.ID
		mu.Unlock()
		if err := c.publish(ctx, chainName, *r); err != nil {
			return outcomes, err
		}
	}
	if !wait || len(reqs) == 0 {
		return outcomes, nil
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
	c.collectStored(outcomes, &mu, deliver)
	return outcomes, nil
}

func (c *Client) publish(ctx context.Context, chainName string, r stream.Request) error {
	body, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("client: encoding request %s: %w", r.ID, err)
	}
	msg := nats.NewMsg(stream.RequestSubject(chainName))
	msg.Data = body
	msg.Header.Set(stream.HeaderContentType, stream.JSON.ContentType())
	msg.Header.Set(stream.HeaderMsgID, r.ID)
	if _, err := c.js.PublishMsg(ctx, msg); err != nil {
		if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
			return fmt.Errorf("client: no stream takes %s: is chain %q configured and a processor started?", msg.Subject, chainName)
		}
		return fmt.Errorf("client: publishing request %s: %w", r.ID, err)
	}
	return nil
}

// collectStored reads the results the inbox missed from DETOUR_RESULTS and
// marks the rest as missing.
func (c *Client) collectStored(outcomes []Outcome, mu *sync.Mutex, deliver func(string, chain.Result)) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := c.js.Stream(ctx, stream.ResultsStream)
	mu.Lock()
	missing := []string{}
	for _, o := range outcomes {
		if o.Result.Status == "" {
			missing = append(missing, o.ID)
		}
	}
	mu.Unlock()
	for _, id := range missing {
		if err != nil {
			break
		}
		if m, getErr := s.GetLastMsgForSubject(ctx, stream.ResultSubject(id)); getErr == nil {
			if res, decErr := stream.DecodeResult(m.Data, m.Header); decErr == nil {
				deliver(id, res)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range outcomes {
		if outcomes[i].Result.Status == "" {
			outcomes[i].Err = ErrNoResult
		}
	}
}
