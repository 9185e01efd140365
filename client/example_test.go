package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/client"
	"github.com/detourhq/detour/internal/topology"
	"github.com/detourhq/detour/wire"
)

// Send publishes a request and waits for its result.
func ExampleClient_Send() {
	// An embedded NATS server with detour's streams and, instead of a
	// processor, the stand-in of this file (standIn, below). Against a
	// running detour, connect to its NATS server instead.
	nc, stop := startDetourStandIn()
	defer stop()

	c, err := client.New(nc)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.Send(ctx, "default", wire.Request{
		Messages: []chain.Message{{Role: "user", Content: "hello"}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Status, res.Provider, res.Content)
	// Output: ok stand-in echo: hello
}

// Publish stores a request and returns at once; Result collects its result
// later, from DETOUR_RESULTS, even from another process that knows the id.
func ExampleClient_Publish() {
	nc, stop := startDetourStandIn() // NATS and a stand-in for a processor, as in the Send example
	defer stop()

	c, err := client.New(nc)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	receipt, err := c.Publish(ctx, "default", wire.Request{
		ID:       "order-42",
		Messages: []chain.Message{{Role: "user", Content: "where is my order?"}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := c.Result(ctx, receipt)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(receipt.ID, res.Status, res.Content)
	// Output: order-42 ok echo: where is my order?
}

// Ask sends a request with NATS request/reply to detour.ask.<chain>; the
// reply is the result. A request the endpoint refuses is an *AskError.
func ExampleClient_Ask() {
	nc, stop := startDetourStandIn() // NATS and a stand-in for a processor, as in the Send example
	defer stop()

	c, err := client.New(nc)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.Ask(ctx, "default", wire.Request{
		Messages: []chain.Message{{Role: "user", Content: "hi"}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Status, res.Content)

	_, err = c.Ask(ctx, "default", wire.Request{}) // no messages
	var refused *client.AskError
	if errors.As(err, &refused) {
		fmt.Println(refused.Code, errors.Is(err, wire.ErrBadRequest))
	}
	// Output:
	// ok echo: hi
	// 400 true
}

// startDetourStandIn starts an embedded NATS server with JetStream, creates
// detour's streams and consumer for the chain "default" as a processor
// would, and runs standIn and standInAsk in the place of a processor. stop
// ends them and the server.
func startDetourStandIn() (nc *nats.Conn, stop func()) {
	dir, err := os.MkdirTemp("", "detour-example")
	if err != nil {
		panic(err)
	}
	srv, err := server.NewServer(&server.Options{JetStream: true, StoreDir: dir, Port: -1})
	if err != nil {
		panic(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		panic("the NATS server did not start")
	}
	nc, err = nats.Connect(srv.ClientURL())
	if err != nil {
		panic(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	err = topology.Ensure(ctx, js, topology.Streams{
		Chains: []string{"default"}, Replicas: 1, AckWait: 30 * time.Second, MaxAckPending: 100, ResultTTL: time.Hour,
	})
	if err != nil {
		panic(err)
	}
	consuming, err := standIn(ctx, js)
	if err != nil {
		panic(err)
	}
	svc, err := standInAsk(nc, js)
	if err != nil {
		panic(err)
	}
	return nc, func() {
		_ = svc.Stop()
		consuming.Stop()
		nc.Close()
		srv.Shutdown()
		srv.WaitForShutdown()
		_ = os.RemoveAll(dir)
	}
}

// standIn is NOT a processor: it stands in for one in these examples, with
// a few lines of NATS code. It takes each request of the chain "default",
// stores an ok result that echoes the last message under
// detour.results.<id>, publishes it to the request's reply subject, and
// acks. A processor runs the chain's providers instead, retries, falls back,
// and dead-letters what it cannot answer.
func standIn(ctx context.Context, js jetstream.JetStream) (jetstream.ConsumeContext, error) {
	cons, err := js.Consumer(ctx, wire.RequestsStream, wire.ConsumerName("default"))
	if err != nil {
		return nil, err
	}
	return cons.Consume(func(m jetstream.Msg) {
		meta, err := m.Metadata()
		if err != nil {
			return
		}
		req, err := wire.DecodeRequest(m.Data(), m.Headers(), meta.Sequence.Stream, []string{wire.ResultsPrefix, "_INBOX."})
		if err != nil {
			_ = m.Term()
			return
		}
		res := chain.Result{ID: req.ID, Status: chain.StatusOK, Provider: "stand-in", Model: "echo",
			Content: "echo: " + req.Messages[len(req.Messages)-1].Content}
		out := nats.NewMsg(wire.ResultSubject(req.ID))
		out.Data, _ = json.Marshal(res)
		out.Header.Set(wire.HeaderContentType, wire.JSON.ContentType())
		out.Header.Set(wire.HeaderMsgID, req.ID)
		wire.MarkAnswers(out.Header, meta.Sequence.Stream, meta.Timestamp)
		if _, err := js.PublishMsg(ctx, out); err != nil {
			_ = m.Nak()
			return
		}
		if req.ReplyTo != out.Subject {
			out.Subject = req.ReplyTo
			_ = js.Conn().PublishMsg(out)
		}
		_ = m.Ack()
	})
}

// standInAsk is NOT a processor's endpoint either: it stands in for the
// micro service "detour" on detour.ask.default. It refuses a request that
// does not decode with a 400 error reply, and stores any other with the
// asker's inbox as its reply subject, for standIn to answer.
func standInAsk(nc *nats.Conn, js jetstream.JetStream) (micro.Service, error) {
	svc, err := micro.AddService(nc, micro.Config{Name: "detour", Version: "0.0.0"})
	if err != nil {
		return nil, err
	}
	err = svc.AddEndpoint("default", micro.HandlerFunc(func(r micro.Request) {
		if _, err := wire.DecodeRequest(r.Data(), nats.Header(r.Headers()), 0, nil); err != nil {
			_ = r.Error("400", err.Error(), nil)
			return
		}
		msg := nats.NewMsg(wire.RequestSubject("default"))
		msg.Data = r.Data()
		maps.Copy(msg.Header, nats.Header(r.Headers()))
		msg.Header.Set(wire.HeaderReplyTo, r.Reply())
		if _, err := js.PublishMsg(context.Background(), msg); err != nil {
			_ = r.Error("503", err.Error(), nil)
		}
	}), micro.WithEndpointSubject(wire.AskSubject("default")))
	return svc, err
}
