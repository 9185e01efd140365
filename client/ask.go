package client

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/wire"
)

// Ask sends req with NATS request/reply to detour.ask.<chainName> and
// returns the result, which is the reply: a processor's endpoint stores the
// request with the connection's inbox as its reply subject, and the
// processor that takes it answers there. The request is sent as JSON, with
// Nats-Msg-Id set to its id (a NUID when req.ID is empty); req.ReplyTo must
// be empty, since the inbox is the reply subject. ctx bounds the wait for
// the answer, not only for the store; without a deadline Ask waits until
// the answer comes. Ask does not retry: a request asked again with its id
// within 2 minutes is refused as a duplicate (409), and its result is the
// first one's.
//
// A failed result is returned with a nil error. The error is an *AskError
// when the endpoint refused the request or could not store it; it wraps
// nats.ErrNoResponders when no processor serves the chain, and ctx's error
// when the wait ended first (the request may be stored all the same: its
// result is then under detour.results.<id>, where Result reads it; give req
// an ID to know where).
func (c *Client) Ask(ctx context.Context, chainName string, req wire.Request) (chain.Result, error) {
	if err := withID(&req); err != nil {
		return chain.Result{}, err
	}
	msg, err := requestMsg(wire.AskSubject(chainName), req)
	if err != nil {
		return chain.Result{}, err
	}
	reply, err := c.nc.RequestMsgWithContext(ctx, msg)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return chain.Result{}, fmt.Errorf("client: no processor serves %s: is chain %q configured and a processor started? %w", msg.Subject, chainName, err)
	case err != nil:
		return chain.Result{}, fmt.Errorf("client: asking %s for request %s: %w", msg.Subject, req.ID, err)
	}
	res, decodeErr := wire.DecodeResult(reply.Data, reply.Header)
	if code := reply.Header.Get(micro.ErrorCodeHeader); code != "" {
		e := &AskError{Code: code, Description: reply.Header.Get(micro.ErrorHeader)}
		if decodeErr == nil {
			e.Result = res
		}
		return chain.Result{}, e
	}
	if decodeErr != nil {
		return chain.Result{}, fmt.Errorf("client: the reply on %s is not a result: %w", msg.Subject, decodeErr)
	}
	return res, nil
}

// AskError is the error reply of detour.ask.<chain>: the request was refused
// or not stored, and nothing was queued (docs/requests.md#error-replies).
type AskError struct {
	// Code is the reply's Nats-Service-Error-Code, after the HTTP status of
	// the same meaning: "400" a request a processor would dead-letter,
	// "409" a Nats-Msg-Id stored within the last 2 minutes (its result goes
	// where that request named, and to detour.results.<id>), "413" too
	// large, "503" not stored (DETOUR_REQUESTS full or missing, JetStream
	// unavailable or slow to acknowledge).
	Code string
	// Description is the reason, from Nats-Service-Error.
	Description string
	// Result is the failed result the reply carries ({id, status, error});
	// zero when its body does not decode.
	Result chain.Result
}

// Error is the code and the reason.
func (e *AskError) Error() string {
	return fmt.Sprintf("client: refused (%s): %s", e.Code, e.Description)
}

// Unwrap returns the condition of wire that the reason names, so that
// errors.Is works on an AskError as on a publish's error: wire.ErrFull,
// wire.ErrBadRequest or wire.ErrBadReplySubject; nil for any other.
func (e *AskError) Unwrap() error {
	switch d := e.Description; {
	case strings.Contains(d, wire.ErrFull.Error()):
		return wire.ErrFull
	case strings.HasPrefix(d, wire.ErrBadRequest.Error()+":"):
		return wire.ErrBadRequest
	case strings.HasPrefix(d, wire.ErrBadReplySubject.Error()+":"):
		return wire.ErrBadReplySubject
	}
	return nil
}
