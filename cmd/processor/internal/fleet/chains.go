package fleet

import (
	"fmt"
	"slices"
	"strings"

	"github.com/samber/lo"
)

// ChainConflict is a chain name that processors run with different
// providers: they share the chain's consumer, so its requests go to
// whichever takes them, and are answered by either list.
type ChainConflict struct {
	Chain string `json:"chain"`
	// Lists are the different lists of providers, each with the
	// processors that run it, sorted by the providers' names joined.
	Lists []HeldList `json:"lists"`
}

// HeldList is one list of a chain's providers and who runs it.
type HeldList struct {
	// Providers are the chain's providers in fallback order.
	Providers  []string `json:"providers"`
	Processors []string `json:"processors"`
}

// String names the chain and each list with its processors.
func (c ChainConflict) String() string {
	parts := lo.Map(c.Lists, func(l HeldList, _ int) string {
		return fmt.Sprintf("[%s] (on %s)", strings.Join(l.Providers, " "), strings.Join(l.Processors, ", "))
	})
	return fmt.Sprintf("chain %q has different providers: %s", c.Chain, strings.Join(parts, " vs "))
}

// ChainConflicts returns the chain names that instances run with more
// than one list of providers (order counts: it is the fallback order),
// sorted by name.
func ChainConflicts(instances []Instance) []ChainConflict {
	var out []ChainConflict
	runs := func(in Instance) map[string][]string { return in.Chains }
	for name, ways := range disagreements(instances, runs, func(p []string) string { return strings.Join(p, ",") }) {
		lists := lo.Map(ways, func(w variant[[]string], _ int) HeldList {
			return HeldList{Providers: w.value, Processors: w.processors}
		})
		out = append(out, ChainConflict{Chain: name, Lists: lists})
	}
	return out
}

// ChainsInvolving returns the chain conflicts in which processor runs one
// of the lists.
func ChainsInvolving(conflicts []ChainConflict, processor string) []ChainConflict {
	return slices.DeleteFunc(slices.Clone(conflicts), func(c ChainConflict) bool {
		return !slices.ContainsFunc(c.Lists, func(l HeldList) bool { return slices.Contains(l.Processors, processor) })
	})
}
