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
	"github.com/detourhq/detour/internal/text"
)

// Metadata keys of the micro service that carry the announcement.
const (
	// KeyProcessor holds the processor's id, as in the cooldowns it opens.
	KeyProcessor = "processor"
	// KeyProviderPrefix starts the key of each provider's definition:
	// "provider.<name>", its value the Definition as JSON.
	KeyProviderPrefix = "provider."
	// KeyChainPrefix starts the key of each chain's providers:
	// "chain.<name>", its value their names in fallback order, as a JSON
	// array.
	KeyChainPrefix = "chain."
)

// Metadata is the announcement of a processor running file's providers and
// chains, to put in its micro service's metadata.
func Metadata(processor string, file *config.File) map[string]string {
	md := map[string]string{KeyProcessor: processor}
	for _, p := range file.Providers {
		b, _ := json.Marshal(Define(p))
		md[KeyProviderPrefix+p.Name] = string(b)
	}
	for name, providers := range file.Chains {
		b, _ := json.Marshal(providers)
		md[KeyChainPrefix+name] = string(b)
	}
	return md
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

// Instance is one running processor as its announcement shows it.
type Instance struct {
	Processor string                `json:"processor"`
	Providers map[string]Definition `json:"providers"`
	// Chains holds each chain's providers in fallback order.
	Chains map[string][]string `json:"chains,omitempty"`
	// Omitted counts the definitions and chains of its announcement that
	// Discover left out: over a bound, or not one a processor could
	// announce.
	Omitted int `json:"-"`
}

// Anyone on the NATS can answer a discovery (micro has no
// authentication), so what one round keeps is bounded: a forger
// announcing thousands of definitions costs a bounded amount of memory,
// of log and of status, and the real processors' announcements, far
// below these bounds, are read whole.
const (
	// MaxResponders is the most announcements a round keeps.
	MaxResponders = 256
	// MaxPerResponder is the most definitions a round keeps of one
	// announcement, and the most chains.
	MaxPerResponder = 128
	// MaxDefinitions is the most different definitions and chains' lists
	// of providers a round keeps in all; processors that agree share one,
	// at no further cost.
	MaxDefinitions = 2048
	// MaxVariants is the most different definitions of one provider name,
	// or lists of providers of one chain name, a round keeps.
	MaxVariants = 8
	// MaxChainLength is the most providers of an announced chain a round
	// reads; a longer chain is left out.
	MaxChainLength = 32
	// maxText bounds each text field of a definition, in bytes; real ones
	// are a few dozen.
	maxText = 512
	// maxProcessor bounds a processor id, <hostname>-<pid>-<random>.
	maxProcessor = 300
)

// Providers returns the provider names that instances announce, sorted,
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

// Discover asks every instance of the micro service service for its info
// and returns the announcements that arrive within wait, within the bounds
// above; an instance that announces nothing (no processor key) is left out.
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
	r := newRound()
	for len(r.out) < MaxResponders {
		msg, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			// No responders: no processor runs the service yet, this one's
			// own included at its start.
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, nats.ErrNoResponders) {
				return r.out, nil
			}
			return r.out, fmt.Errorf("fleet: reading %s replies: %w", subject, err)
		}
		var info micro.Info
		if json.Unmarshal(msg.Data, &info) != nil {
			continue
		}
		r.add(info.Metadata)
	}
	return r.out, nil
}

// round is what one discovery has kept so far.
type round struct {
	out []Instance
	// kept counts the different definitions and lists kept in all;
	// variants holds the definitions by provider name and fingerprint,
	// lists the chains' lists by chain name and the names joined, shared
	// by the announcements that agree.
	kept     int
	variants map[string]map[string]Definition
	lists    map[string]map[string][]string
}

func newRound() *round {
	return &round{variants: map[string]map[string]Definition{}, lists: map[string]map[string][]string{}}
}

// add keeps the announcement in md, within the round's bounds.
func (r *round) add(md map[string]string) {
	in, ok := instanceOf(md)
	if !ok {
		return
	}
	var keys []string
	for k := range md {
		if strings.HasPrefix(k, KeyProviderPrefix) || strings.HasPrefix(k, KeyChainPrefix) {
			keys = append(keys, k)
		}
	}
	// In key order, so that what is kept of an announcement over the
	// bounds does not change from round to round by map order alone.
	slices.Sort(keys)
	for _, k := range keys {
		kept := false
		if name, ok := strings.CutPrefix(k, KeyProviderPrefix); ok {
			kept = len(in.Providers) < MaxPerResponder && r.addDefinition(&in, name, md[k])
		} else {
			kept = len(in.Chains) < MaxPerResponder && r.addChain(&in, strings.TrimPrefix(k, KeyChainPrefix), md[k])
		}
		if !kept {
			in.Omitted++
		}
	}
	r.out = append(r.out, in)
}

// addDefinition keeps the definition announced for provider name in in,
// if it is one a processor could announce and within the bounds.
func (r *round) addDefinition(in *Instance, name, value string) bool {
	d, ok := definitionOf(name, value)
	if !ok {
		return false
	}
	seen := r.variants[name]
	if same, ok := seen[d.Fingerprint]; ok {
		in.Providers[name] = same
		return true
	}
	if len(seen) >= MaxVariants || r.kept >= MaxDefinitions {
		return false
	}
	if seen == nil {
		seen = map[string]Definition{}
		r.variants[name] = seen
	}
	seen[d.Fingerprint] = d
	in.Providers[name] = d
	r.kept++
	return true
}

// addChain keeps the providers announced for chain name in in, if they
// are a list a processor could announce (chain and provider names a chain
// file accepts, at most MaxChainLength of them) and within the bounds.
func (r *round) addChain(in *Instance, name, value string) bool {
	var providers []string
	if !config.ValidName(name) || json.Unmarshal([]byte(value), &providers) != nil ||
		len(providers) == 0 || len(providers) > MaxChainLength {
		return false
	}
	for _, p := range providers {
		if !config.ValidName(p) {
			return false
		}
	}
	joined := strings.Join(providers, ",")
	seen := r.lists[name]
	if same, ok := seen[joined]; ok {
		in.Chains[name] = same
		return true
	}
	if len(seen) >= MaxVariants || r.kept >= MaxDefinitions {
		return false
	}
	if seen == nil {
		seen = map[string][]string{}
		r.lists[name] = seen
	}
	seen[joined] = providers
	in.Chains[name] = providers
	r.kept++
	return true
}

// instanceOf reads an announcement's processor from micro metadata; add
// reads its definitions.
func instanceOf(md map[string]string) (Instance, bool) {
	in := Instance{Processor: text.Cut(md[KeyProcessor], maxProcessor), Providers: map[string]Definition{}, Chains: map[string][]string{}}
	if in.Processor == "" {
		return Instance{}, false
	}
	return in, true
}

// definitionOf reads the definition announced for name, if it is one a
// processor could announce: a provider name a chain file accepts, a
// fingerprint as Define makes them, and text fields within maxText.
func definitionOf(name, value string) (Definition, bool) {
	var d Definition
	if !config.ValidName(name) || json.Unmarshal([]byte(value), &d) != nil || !isDigest(d.Fingerprint) {
		return Definition{}, false
	}
	for _, f := range []string{d.Type, d.BaseURL, d.Model, d.Policy, d.Rules} {
		if len(f) > maxText {
			return Definition{}, false
		}
	}
	return d, true
}

// isDigest reports whether s is a digest as digest writes it.
func isDigest(s string) bool {
	if len(s) != 16 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
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
