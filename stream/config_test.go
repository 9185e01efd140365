package stream_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/internal/topology"
	"github.com/detourhq/detour/stream"
)

// checkConfigErr checks err against want: nil for "", else an error that
// names every line of want.
func checkConfigErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("err = %v, want nil", err)
	case want == "":
	case err == nil:
		t.Fatalf("err = nil, want %q", want)
	default:
		for w := range strings.Lines(want) {
			if !strings.Contains(err.Error(), strings.TrimSpace(w)) {
				t.Errorf("err = %q, want it to contain %q", err, strings.TrimSpace(w))
			}
		}
	}
}

// A config refused is refused before the server is touched: the refused
// cases run without connections.

func TestProcessorConfigValidation(t *testing.T) {
	valid := stream.ProcessorConfig{
		Chains:     map[string]stream.Runner{"default": &countingRunner{}},
		MaxPayload: 1, RequestTTL: time.Minute, AckWait: time.Second,
	}
	cases := []struct {
		name   string
		change func(*stream.ProcessorConfig)
		want   string
	}{
		{"valid, optional fields unset", func(*stream.ProcessorConfig) {}, ""},
		{"no chains", func(c *stream.ProcessorConfig) { c.Chains = nil }, "stream: ProcessorConfig.Chains must name at least one chain"},
		{"nil runner", func(c *stream.ProcessorConfig) { c.Chains = map[string]stream.Runner{"default": nil} }, `stream: ProcessorConfig.Chains["default"] must not be nil`},
		{"empty reply prefix", func(c *stream.ProcessorConfig) { c.ReplyPrefixes = []string{"_INBOX.", ""} }, "stream: ProcessorConfig.ReplyPrefixes[1] must not be empty"},
		{"zero max payload", func(c *stream.ProcessorConfig) { c.MaxPayload = 0 }, "stream: ProcessorConfig.MaxPayload must be positive"},
		{"negative max payload", func(c *stream.ProcessorConfig) { c.MaxPayload = -1 }, "stream: ProcessorConfig.MaxPayload must be positive"},
		{"zero request ttl", func(c *stream.ProcessorConfig) { c.RequestTTL = 0 }, "stream: ProcessorConfig.RequestTTL must be positive"},
		{"zero ack wait", func(c *stream.ProcessorConfig) { c.AckWait = 0 }, "stream: ProcessorConfig.AckWait must be positive"},
		{"zero value", func(c *stream.ProcessorConfig) { *c = stream.ProcessorConfig{} }, `stream: ProcessorConfig.Chains must name at least one chain
			stream: ProcessorConfig.MaxPayload must be positive
			stream: ProcessorConfig.RequestTTL must be positive
			stream: ProcessorConfig.AckWait must be positive`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := valid
			c.change(&cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if c.want == "" {
				nc, js := natstest.Connect(t, natstest.Start(t))
				if err := topology.Ensure(ctx, js, repairTopology()); err != nil {
					t.Fatal(err)
				}
				_, err := stream.NewProcessor(ctx, nc, js, cfg)
				checkConfigErr(t, err, "")
				return
			}
			_, err := stream.NewProcessor(ctx, nil, nil, cfg)
			checkConfigErr(t, err, c.want)
		})
	}
}

func TestConsumerConfigValidation(t *testing.T) {
	valid := stream.ConsumerConfig{Chains: []string{"default"}, Workers: 1, ShutdownTimeout: time.Second}
	cases := []struct {
		name   string
		change func(*stream.ConsumerConfig)
		want   string
	}{
		{"valid, optional fields unset", func(*stream.ConsumerConfig) {}, ""},
		{"no chains", func(c *stream.ConsumerConfig) { c.Chains = nil }, "stream: ConsumerConfig.Chains must name at least one chain"},
		{"empty chain", func(c *stream.ConsumerConfig) { c.Chains = []string{""} }, "stream: ConsumerConfig.Chains[0] must not be empty"},
		{"zero workers", func(c *stream.ConsumerConfig) { c.Workers = 0 }, "stream: ConsumerConfig.Workers must be positive"},
		{"negative workers", func(c *stream.ConsumerConfig) { c.Workers = -4 }, "stream: ConsumerConfig.Workers must be positive"},
		{"zero shutdown timeout", func(c *stream.ConsumerConfig) { c.ShutdownTimeout = 0 }, "stream: ConsumerConfig.ShutdownTimeout must be positive"},
		{"zero value", func(c *stream.ConsumerConfig) { *c = stream.ConsumerConfig{} }, `stream: ConsumerConfig.Chains must name at least one chain
			stream: ConsumerConfig.Workers must be positive
			stream: ConsumerConfig.ShutdownTimeout must be positive`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := valid
			c.change(&cfg)
			if c.want == "" {
				// A valid config consumes until its context ends.
				_, js := natstest.Connect(t, natstest.Start(t))
				if err := topology.Ensure(context.Background(), js, repairTopology()); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				defer cancel()
				checkConfigErr(t, stream.Consume(ctx, js, nil, cfg), "")
				return
			}
			checkConfigErr(t, stream.Consume(context.Background(), nil, nil, cfg), c.want)
		})
	}
}
