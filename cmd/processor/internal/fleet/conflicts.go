package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/samber/lo"

	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/kvstate"
)

// Record is what processor, running file, records in the provider bucket
// (kvstate.Store.Record): its Instance as JSON.
func Record(processor string, file *config.File) []byte {
	b, _ := json.Marshal(Instance{Processor: processor, Providers: Definitions(file), Chains: maps.Clone(file.Chains)})
	return b
}

// Instances reads the records of running processors (kvstate.Store.Running);
// a record that is not an Instance with a processor is left out.
func Instances(records []json.RawMessage) []Instance {
	return lo.FilterMap(records, func(r json.RawMessage, _ int) (Instance, bool) {
		var in Instance
		ok := json.Unmarshal(r, &in) == nil && in.Processor != ""
		return in, ok
	})
}

// Definitions returns file's providers' definitions by name.
func Definitions(file *config.File) map[string]Definition {
	return lo.SliceToMap(file.Providers, func(p config.Provider) (string, Definition) { return p.Name, Define(p) })
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
		names = slices.AppendSeq(names, maps.Keys(in.Providers))
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
	// Circuit is the circuit the definition keeps (kvstate.Circuit), set
	// by WithCircuits.
	Circuit string `json:"circuit,omitempty"`
}

// String names the provider and each definition with its processors.
func (c Conflict) String() string {
	parts := lo.Map(c.Definitions, func(h Held, _ int) string {
		return fmt.Sprintf("%s (on %s)", h.Definition, strings.Join(h.Processors, ", "))
	})
	return fmt.Sprintf("provider %q is defined differently: %s", c.Provider, strings.Join(parts, " vs "))
}

// Conflicts returns the provider names that instances define in more than
// one way, sorted by name.
func Conflicts(instances []Instance) []Conflict {
	var out []Conflict
	runs := func(in Instance) map[string]Definition { return in.Providers }
	for name, ways := range disagreements(instances, runs, func(d Definition) string { return d.Fingerprint }) {
		held := lo.Map(ways, func(w variant[Definition], _ int) Held { return Held{Definition: w.value, Processors: w.processors} })
		out = append(out, Conflict{Provider: name, Definitions: held})
	}
	return out
}

// variant is one way that processors run a name.
type variant[T any] struct {
	value      T
	processors []string
}

// disagreements yields, in name order, each name that instances run in
// more than one way (runs: what an instance runs by name; key tells the
// ways apart), with its ways in key order, each with its processors sorted.
func disagreements[T any](instances []Instance, runs func(Instance) map[string]T, key func(T) string) iter.Seq2[string, []variant[T]] {
	byName := map[string]map[string]*variant[T]{}
	for _, in := range instances {
		for name, v := range runs(in) {
			if byName[name] == nil {
				byName[name] = map[string]*variant[T]{}
			}
			w := byName[name][key(v)]
			if w == nil {
				w = &variant[T]{value: v}
				byName[name][key(v)] = w
			}
			if !slices.Contains(w.processors, in.Processor) {
				w.processors = append(w.processors, in.Processor)
			}
		}
	}
	return func(yield func(string, []variant[T]) bool) {
		for _, name := range slices.Sorted(maps.Keys(byName)) {
			if len(byName[name]) < 2 {
				continue
			}
			var ways []variant[T]
			for _, k := range slices.Sorted(maps.Keys(byName[name])) {
				slices.Sort(byName[name][k].processors)
				ways = append(ways, *byName[name][k])
			}
			if !yield(name, ways) {
				return
			}
		}
	}
}

// Involving returns the conflicts in which processor holds one of the
// definitions.
func Involving(conflicts []Conflict, processor string) []Conflict {
	return slices.DeleteFunc(slices.Clone(conflicts), func(c Conflict) bool {
		return !slices.ContainsFunc(c.Definitions, func(h Held) bool { return slices.Contains(h.Processors, processor) })
	})
}

// Running reads the records of the running processors from the provider
// bucket, for the commands: none while the bucket does not exist.
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
