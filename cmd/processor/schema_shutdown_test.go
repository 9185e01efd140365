package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"syscall"
	"testing"
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/wire"
)

// TestSIGTERMWhileCompilingLargeSchemas: a processor busy compiling the
// largest schemas a request may carry (each different, so none is cached)
// still exits 0 within its shutdown timeout after SIGTERM, handing back what
// it has not answered.
func TestSIGTERMWhileCompilingLargeSchemas(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the processor and runs it as an OS process")
	}
	// An AckWait far above the wait for results below tells a delivery
	// handed back from one left to expire, however loaded the machine.
	const shutdownTimeout, ackWait = time.Second, 2 * time.Minute
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv)
	fake := providertest.New(providertest.OpenAI, providertest.Slow(200*time.Millisecond, providertest.Answer(`{"p0":"x"}`)))
	t.Cleanup(fake.Close)
	p := startProcess(t, buildProcessor(t), "P", processorEnv(t, srv.ClientURL(), writeChainFile(t, fake.URL, "m"),
		"DETOUR_WORKERS=8", fmt.Sprintf("DETOUR_SHUTDOWN_TIMEOUT=%s", shutdownTimeout), fmt.Sprintf("DETOUR_ACK_WAIT=%s", ackWait)))
	waitConsuming(t, p)

	const n = 64
	base := wideSchema(chain.MaxSchemaBytes - 200)
	for i := range n {
		schema := maps.Clone(base)
		schema["$comment"] = requestID(i) // a different schema each, so none is cached
		data, err := json.Marshal(wire.Request{
			ID:             requestID(i),
			Messages:       []chain.Message{{Role: "user", Content: prompt(requestID(i))}},
			ResponseSchema: schema,
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(context.Background(), wire.RequestSubject(testChain), data); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := js.Consumer(context.Background(), wire.RequestsStream, wire.ConsumerName(testChain))
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the processor to take requests", func() bool {
		ci, err := cons.Info(context.Background())
		return err == nil && ci.NumAckPending > 0
	}, p)
	term := time.Now()
	p.signal(t, syscall.SIGTERM)
	if err := p.wait(t, shutdownTimeout+5*time.Second); err != nil {
		t.Fatalf("processor exited with %v after SIGTERM, want status 0", err)
	}
	t.Logf("exited %v after SIGTERM; %d provider calls", p.at.Sub(term).Round(time.Millisecond), fake.Requests())
	// Nothing it held waits for AckWait: a processor started now answers
	// every request well before it. (A delivery handed back stays counted
	// as ack-pending on the server until a pull takes it.)
	b := startProcess(t, buildProcessor(t), "B", processorEnv(t, srv.ClientURL(), writeChainFile(t, fake.URL, "m"),
		"DETOUR_WORKERS=16", fmt.Sprintf("DETOUR_ACK_WAIT=%s", ackWait)))
	waitConsuming(t, b)
	waitAllResults(t, js, n, ackWait/2, b)
}

// wideSchema is an object schema of at most size bytes of JSON, with
// properties p0, p1, ... The caller makes copies distinct with "$comment".
func wideSchema(size int) map[string]any {
	props := map[string]any{}
	schema := map[string]any{"type": "object", "properties": props}
	for i := 0; ; i++ {
		props[fmt.Sprintf("p%d", i)] = map[string]any{"type": "string", "maxLength": 100}
		if i%50 != 0 {
			continue
		}
		if data, _ := json.Marshal(schema); len(data) > size {
			for j := i; j > i-50; j-- {
				delete(props, fmt.Sprintf("p%d", j))
			}
			return schema
		}
	}
}
