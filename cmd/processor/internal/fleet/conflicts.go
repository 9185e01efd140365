package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/kvstate"
)

// Record is what processor, running file's providers and chains, records
// in the provider bucket (kvstate.Store.Record): its Instance as JSON.
func Record(processor string, file *config.File) []byte {
	b, _ := json.Marshal(Instance{Processor: processor, Providers: Definitions(file), Chains: Chains(file)})
	return b
}

// Instances reads the records of running processors (kvstate.Store.Running);
// a record that is not an Instance with a processor is left out.
func Instances(records []json.RawMessage) []Instance {
	var out []Instance
	for _, r := range records {
		var in Instance
		if json.Unmarshal(r, &in) == nil && in.Processor != "" {
			out = append(out, in)
		}
	}
	return out
}

// Chains returns file's chains' providers by chain name.
func Chains(file *config.File) map[string][]string {
	out := make(map[string][]string, len(file.Chains))
	for name, providers := range file.Chains {
		out[name] = slices.Clone(providers)
	}
	return out
}

// Definitions returns file's providers' definitions by name.
func Definitions(file *config.File) map[string]Definition {
	out := make(map[string]Definition, len(file.Providers))
	for _, p := range file.Providers {
		out[p.Name] = Define(p)
	}
	return out
}

// Instance is one running processor as its record shows it.
type Instance struct {
	Processor string                `json:"processor"`
	Providers map[string]Definition `json:"providers"`
	// Chains holds each chain's providers in fallback order.
	Chains map[string][]string `json:"chains,omitempty"`
}

// Providers returns the provider names that instances run, sorted,
// each once.
func Providers(instances []Instance) []string {
	var names []string
	for _, in := range instances {
		for name := range in.Providers {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
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
	// Circuit is the circuit the definition keeps in the provider bucket
	// (kvstate.Circuit), set by WithCircuits: the provider's name for the
	// definition that holds it, provider=<short fingerprint> for another.
	Circuit string `json:"circuit,omitempty"`
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

// Running reads the records of the running processors from the provider
// bucket, for the commands that run beside them: none while the bucket does
// not exist (no processor has started).
func Running(ctx context.Context, js jetstream.JetStream) ([]Instance, error) {
	kv, err := js.KeyValue(ctx, kvstate.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("fleet: opening %s: %w", kvstate.Bucket, err)
	}
	store := kvstate.New(nil, kv, kvstate.Options{})
	if err := store.Load(ctx); err != nil {
		return nil, err
	}
	return Instances(store.Running()), nil
}
