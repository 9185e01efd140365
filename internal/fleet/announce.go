package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/detourhq/detour/config"
)

// Metadata keys of the micro service that carry the announcement.
const (
	// KeyProcessor holds the processor's id, as in the cooldowns it opens.
	KeyProcessor = "processor"
	// KeyProviderPrefix starts the key of each provider's definition:
	// "provider.<name>", its value the Definition as JSON.
	KeyProviderPrefix = "provider."
)

// Metadata is the announcement of a processor running file's providers, to
// put in its micro service's metadata.
func Metadata(processor string, file *config.File) map[string]string {
	md := map[string]string{KeyProcessor: processor}
	for _, p := range file.Providers {
		b, _ := json.Marshal(Define(p))
		md[KeyProviderPrefix+p.Name] = string(b)
	}
	return md
}

// Definitions returns file's providers' definitions by name.
func Definitions(file *config.File) map[string]Definition {
	out := make(map[string]Definition, len(file.Providers))
	for _, p := range file.Providers {
		out[p.Name] = Define(p)
	}
	return out
}

// Instance is one running processor as its announcement shows it.
type Instance struct {
	Processor string                `json:"processor"`
	Providers map[string]Definition `json:"providers"`
}

// Discover asks every instance of the micro service service for its info
// and returns the announcements that arrive within wait; an instance that
// announces nothing (no processor key) is left out.
func Discover(ctx context.Context, nc *nats.Conn, service string, wait time.Duration) ([]Instance, error) {
	subject, err := micro.ControlSubject(micro.InfoVerb, service, "")
	if err != nil {
		return nil, err
	}
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest(subject, inbox, nil); err != nil {
		return nil, fmt.Errorf("fleet: asking %s: %w", subject, err)
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var out []Instance
	for {
		msg, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return out, nil
			}
			return out, fmt.Errorf("fleet: reading %s replies: %w", subject, err)
		}
		var info micro.Info
		if json.Unmarshal(msg.Data, &info) != nil {
			continue
		}
		if in, ok := instanceOf(info.Metadata); ok {
			out = append(out, in)
		}
	}
}

// instanceOf reads an announcement from micro metadata.
func instanceOf(md map[string]string) (Instance, bool) {
	in := Instance{Processor: md[KeyProcessor], Providers: map[string]Definition{}}
	if in.Processor == "" {
		return Instance{}, false
	}
	for k, v := range md {
		name, ok := strings.CutPrefix(k, KeyProviderPrefix)
		if !ok {
			continue
		}
		var d Definition
		if json.Unmarshal([]byte(v), &d) == nil {
			in.Providers[name] = d
		}
	}
	return in, true
}

// Conflict is a provider name that processors define differently.
type Conflict struct {
	Provider string `json:"provider"`
	// Definitions are the different definitions, each with the processors
	// that run it, sorted by fingerprint.
	Definitions []Held `json:"definitions"`
}

// Held is one definition of a provider name and who runs it.
type Held struct {
	Definition
	Processors []string `json:"processors"`
}

// String names the provider and each definition with its processors.
func (c Conflict) String() string {
	parts := make([]string, len(c.Definitions))
	for i, h := range c.Definitions {
		parts[i] = fmt.Sprintf("%s (on %s)", h.Definition, strings.Join(h.Processors, ", "))
	}
	return fmt.Sprintf("provider %q is defined differently: %s", c.Provider, strings.Join(parts, " vs "))
}

// Conflicts returns the provider names that instances define in more than
// one way, sorted by name.
func Conflicts(instances []Instance) []Conflict {
	byName := map[string]map[string]*Held{}
	for _, in := range instances {
		for name, d := range in.Providers {
			if byName[name] == nil {
				byName[name] = map[string]*Held{}
			}
			h := byName[name][d.Fingerprint]
			if h == nil {
				h = &Held{Definition: d}
				byName[name][d.Fingerprint] = h
			}
			if !slices.Contains(h.Processors, in.Processor) {
				h.Processors = append(h.Processors, in.Processor)
			}
		}
	}
	var out []Conflict
	for name, held := range byName {
		if len(held) < 2 {
			continue
		}
		c := Conflict{Provider: name}
		for _, h := range held {
			slices.Sort(h.Processors)
			c.Definitions = append(c.Definitions, *h)
		}
		sort.Slice(c.Definitions, func(i, j int) bool { return c.Definitions[i].Fingerprint < c.Definitions[j].Fingerprint })
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Provider < out[j].Provider })
	return out
}

// Involving returns the conflicts in which processor holds one of the
// definitions.
func Involving(conflicts []Conflict, processor string) []Conflict {
	return slices.DeleteFunc(slices.Clone(conflicts), func(c Conflict) bool {
		return !slices.ContainsFunc(c.Definitions, func(h Held) bool { return slices.Contains(h.Processors, processor) })
	})
}
