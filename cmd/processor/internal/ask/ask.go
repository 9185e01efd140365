package ask

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/deadletter"
	"github.com/detourhq/detour/internal/buildinfo"
	"github.com/detourhq/detour/internal/logs"
	"github.com/detourhq/detour/internal/topology"
	"github.com/detourhq/detour/wire"
)

// ServiceName is the micro service's name, part of the contract
// (docs/requests.md#requestreply); its endpoints are on wire.AskSubject.
const ServiceName = "detour"

// Codes of the error replies (micro's Nats-Service-Error-Code header),
// after the HTTP statuses of the same meaning (docs/requests.md#error-replies).
// A JetStream error with a status of its own is answered with that status.
const (
	CodeBadRequest  = "400" // would be dead-lettered bad_request or bad_reply_subject
	CodeDuplicate   = "409" // a request with this Nats-Msg-Id in the last 2 minutes
	CodeTooLarge    = "413" // over DETOUR_MAX_PAYLOAD or the server's max payload
	CodeUnavailable = "503" // not stored: no stream, full, unavailable or no ack in time
)

// jsErrRollupFailed is JSStreamRollupFailedF of nats-server's errors.json:
// its status is a generic 500, though only a request's own Nats-Rollup
// causes it.
const jsErrRollupFailed jetstream.ErrorCode = 10111

// StoreTimeout bounds the wait for the requests stream's acknowledgement.
const StoreTimeout = 5 * time.Second

// compileWait bounds the wait for a response_schema to compile; askSchemas
// is how many compiled schemas the endpoint keeps, as clients tend to send
// one schema with many requests.
const (
	compileWait = time.Second
	askSchemas  = 4
)

// Config is what Serve serves.
type Config struct {
	// Conn carries the service; the caller owns it.
	Conn *nats.Conn
	// JetStream stores the requests; on Conn.
	JetStream jetstream.JetStream
	// Chains get one endpoint each, named after the chain. Required.
	Chains []string
	// ReplyPrefixes and MaxPayload are the processor's, to check a request
	// as it would.
	ReplyPrefixes []string
	MaxPayload    int
	// Version is the service's semantic version; "" is the build's
	// (buildinfo.Info.Semver).
	Version string
	// Metadata is shown by `nats micro info`.
	Metadata map[string]string
	Logger   *slog.Logger
}

// Serve adds the micro service and serves its endpoints until ctx ends, then
// drains them and returns once the requests received are stored or
// answered. It returns an error only when the service cannot start.
func Serve(ctx context.Context, cfg Config) error {
	if len(cfg.Chains) == 0 {
		return errors.New("ask: no chains to serve")
	}
	version := cmp.Or(cfg.Version, buildinfo.Read().Semver())
	s := &server{cfg: cfg, log: logs.OrDiscard(cfg.Logger), schemas: chain.NewSchemaCache(askSchemas), dead: deadletter.NewPublisher(cfg.JetStream)}
	svc, err := micro.AddService(cfg.Conn, micro.Config{
		Name:        ServiceName,
		Version:     version,
		Description: "detour: LLM requests with provider fallback; a request to " + wire.AskPrefix + "<chain> is answered with its result",
		Metadata:    cfg.Metadata,
	})
	if err != nil {
		return fmt.Errorf("ask: adding the micro service %s: %w", ServiceName, err)
	}
	subjects := make([]string, 0, len(cfg.Chains))
	for _, name := range cfg.Chains {
		// micro calls an endpoint's handler for one request at a time: the
		// store is awaited in it, so the endpoint's stats cover it.
		err := svc.AddEndpoint(name, micro.HandlerFunc(func(r micro.Request) { s.ask(name, r) }),
			micro.WithEndpointSubject(wire.AskSubject(name)),
			micro.WithEndpointMetadata(map[string]string{"chain": name, "stored_on": wire.RequestSubject(name)}))
		if err != nil {
			_ = svc.Stop()
			return fmt.Errorf("ask: adding the endpoint %s: %w", wire.AskSubject(name), err)
		}
		subjects = append(subjects, wire.AskSubject(name))
	}
	s.log.Info("answering requests", "subjects", subjects, "service", ServiceName, "version", version, "instance", svc.Info().ID)

	<-ctx.Done()
	// Stop drains; after the flush, what the server sent before it took the
	// unsubscription has arrived, and taking busy waits until it is handled.
	if err := svc.Stop(); err != nil {
		s.log.Warn("stopping the micro service", "err", err)
	}
	_ = cfg.Conn.FlushTimeout(time.Second)
	s.busy.Lock() // the wait for the handlers is the point
	s.busy.Unlock()
	s.log.Info("stopped answering requests", "subjects", subjects)
	return nil
}

// server handles the endpoints' requests.
type server struct {
	cfg     Config
	log     *slog.Logger
	schemas *chain.SchemaCache // compiled response_schemas, as a processor keeps them
	dead    *deadletter.Publisher

	// busy is read-locked by every handler at work, so that Serve can wait
	// for them.
	busy sync.RWMutex
}

// unknownID stands in for the stream sequence, not known before the store.
const unknownID = math.MaxUint64

// ask checks and stores one request, its reply subject as Detour-Reply-To,
// with a Nats-Msg-Id of its own if it names no id, else as sent.
func (s *server) ask(chainName string, r micro.Request) {
	s.busy.RLock()
	defer s.busy.RUnlock()
	msg := nats.NewMsg(wire.RequestSubject(chainName))
	msg.Data = r.Data()
	maps.Copy(msg.Header, nats.Header(r.Headers()))
	inbox := r.Reply()
	if inbox == "" {
		// A publish: nobody to answer. Stored as if published to
		// detour.requests.<chain>, so it is not lost.
		if _, err := s.store(msg); err != nil {
			s.log.Warn("a request without a reply subject could not be stored", "subject", r.Subject(), "err", err)
		}
		return
	}
	msg.Header.Set(wire.HeaderReplyTo, inbox)
	if err := wire.CheckReplySubject(inbox, s.cfg.ReplyPrefixes); err != nil {
		s.refuseReplySubject(chainName, msg, err)
		return
	}
	if len(msg.Data) > s.cfg.MaxPayload {
		// Its id read as a processor reads one too large to decode.
		var id string
		if a, ok := wire.RefusedAddress(msg.Data, msg.Header, 0, nil); ok {
			id = a.ID
		}
		s.refuse(r, msg, id, CodeTooLarge, fmt.Sprintf("too large: payload of %d bytes exceeds DETOUR_MAX_PAYLOAD %d",
			len(msg.Data), s.cfg.MaxPayload))
		return
	}
	d, err := wire.DecodeRequest(msg.Data, msg.Header, unknownID, s.cfg.ReplyPrefixes)
	id := d.ID
	if id == strconv.FormatUint(unknownID, 10) {
		id = ""
	}
	switch {
	case err != nil: // "bad request: …" or "bad reply subject: …"
		s.refuse(r, msg, id, CodeBadRequest, err.Error())
		return
	case d.ReplyTo != inbox:
		// The body's reply_to wins over Detour-Reply-To: the result would
		// go there, and the requester would wait in vain.
		s.refuse(r, msg, id, CodeBadRequest, fmt.Sprintf("%v: reply_to %q: a request to %s is answered on its own reply subject; leave reply_to out, or publish to %s to send the result elsewhere",
			wire.ErrBadReplySubject, d.ReplyTo, r.Subject(), msg.Subject))
		return
	case !s.compiles(&d, r, msg, id):
		return
	}
	if id == "" {
		// Its id would be its sequence, which a recreated stream hands out
		// again: a unique Nats-Msg-Id names it instead.
		id = nuid.Next()
		msg.Header.Set(wire.HeaderMsgID, id)
	}
	ack, err := s.store(msg)
	if err != nil {
		code, why := s.storeError(chainName, id, err)
		s.refuse(r, msg, id, code, why)
		return
	}
	if ack.Duplicate {
		s.refuse(r, msg, id, CodeDuplicate, fmt.Sprintf(
			"duplicate: %s already holds a request with Nats-Msg-Id %q from the last 2 minutes (sequence %d); its result goes where that request named, and to %s",
			wire.RequestsStream, msg.Header.Get(wire.HeaderMsgID), ack.Sequence, wire.ResultSubject(id)))
		return
	}
	// Stored: the processor that takes it answers on inbox.
	s.log.Debug("request stored", "chain", chainName, "id", id, "seq", ack.Sequence)
}

// compiles reports whether the request's response_schema, if any,
// compiles, and refuses it when not. One that outlasts compileWait is left
// to the processor: the requests behind it wait too.
func (s *server) compiles(d *wire.Decoded, r micro.Request, msg *nats.Msg, id string) bool {
	if d.ResponseSchema == nil {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), compileWait)
	defer cancel()
	if _, err := d.ChainRequest(ctx, s.schemas); err != nil && ctx.Err() == nil {
		s.refuse(r, msg, id, CodeBadRequest, err.Error())
		return false
	}
	return true
}

// refuseReplySubject dead-letters bad_reply_subject a request whose reply
// subject no processor may answer on. Nothing is sent there, not even an
// error reply, which would go out with this service's credentials.
func (s *server) refuseReplySubject(chainName string, msg *nats.Msg, why error) {
	ctx, cancel := context.WithTimeout(context.Background(), StoreTimeout)
	defer cancel()
	letter := deadletter.Letter{Chain: chainName, Reason: deadletter.ReasonBadReplySubject, Err: why, Data: msg.Data, Header: msg.Header}
	if err := s.dead.Publish(ctx, letter); err != nil {
		s.log.Warn("a request with a reply subject no processor may answer on could not be dead-lettered",
			"chain", chainName, "err", err)
		return
	}
	s.log.Warn("dead-lettered a request with a reply subject no processor may answer on", "chain", chainName, "err", why)
}

func (s *server) store(msg *nats.Msg) (*jetstream.PubAck, error) {
	ctx, cancel := context.WithTimeout(context.Background(), StoreTimeout)
	defer cancel()
	return s.cfg.JetStream.PublishMsg(ctx, msg)
}

// storeError is the code and description of a request not stored.
func (s *server) storeError(chainName, id string, err error) (string, string) {
	subject := wire.RequestSubject(chainName)
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, nats.ErrMaxPayload):
		return CodeTooLarge, fmt.Sprintf("too large: with its headers the request is over the server's max payload of %d bytes",
			s.cfg.Conn.MaxPayload())
	case topology.Gone(err):
		s.log.Warn("a request could not be stored: no stream takes its subject", "subject", subject)
		return CodeUnavailable, fmt.Sprintf("not stored: no stream takes %s (%s is missing; a processor puts it back when its pulls fail); try again shortly",
			subject, wire.RequestsStream)
	case wire.Full(err) != nil:
		// Many in a row: each requester hears why, the log needn't.
		s.log.Debug("a request could not be stored: the requests stream is full", "subject", subject, "err", err)
		return CodeUnavailable, "not stored: " + wire.Full(err).Error() + "; try again shortly"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		s.log.Warn("a request could not be stored: no acknowledgement in time", "subject", subject, "timeout", StoreTimeout)
		why := fmt.Sprintf("not confirmed: %s did not acknowledge the request within %s; it may have been stored all the same", wire.RequestsStream, StoreTimeout)
		if id != "" {
			why += ", and then its result will be at " + wire.ResultSubject(id)
		}
		return CodeUnavailable, why
	case errors.As(err, &apiErr):
		code := CodeUnavailable
		switch {
		case apiErr.ErrorCode == jsErrRollupFailed:
			code = CodeBadRequest
		case apiErr.Code >= 400 && apiErr.Code < 600:
			code = strconv.Itoa(apiErr.Code)
		}
		s.log.Warn("a request could not be stored", "subject", subject, "err", err)
		return code, fmt.Sprintf("not stored: %s refused it: %s", wire.RequestsStream, apiErr.Description)
	default:
		s.log.Warn("a request could not be stored", "subject", subject, "err", err)
		return CodeUnavailable, fmt.Sprintf("not stored: %v", err)
	}
}

// failure is the body of an error reply: a failed result.
type failure struct {
	ID     string       `json:"id,omitempty" msgpack:"id,omitempty"`
	Status chain.Status `json:"status" msgpack:"status"`
	Error  string       `json:"error" msgpack:"error"`
}

// refuse answers r with micro's error reply, a failed result as its body in
// the encoding a processor would use.
func (s *server) refuse(r micro.Request, msg *nats.Msg, id, code, description string) {
	enc := wire.RefusedEncoding(msg.Data, msg.Header)
	f := failure{ID: id, Status: chain.StatusFailed, Error: description}
	marshal := msgpack.Marshal
	if enc == wire.JSON {
		marshal = json.Marshal
	}
	body, _ := marshal(f) // three strings cannot fail
	header := micro.Headers{
		wire.HeaderContentType: {enc.ContentType()},
		wire.HeaderStatus:      {string(chain.StatusFailed)},
	}
	if id != "" {
		header[wire.HeaderRequestID] = []string{id}
	}
	// micro's own error text is at most one header line.
	description = strings.ReplaceAll(description, "\n", " ")
	if err := r.Error(code, description, body, micro.WithHeaders(header)); err != nil {
		s.log.Debug("an error reply could not be sent", "subject", r.Subject(), "err", err)
	}
	s.log.Debug("request refused", "subject", r.Subject(), "code", code, "error", description)
}
