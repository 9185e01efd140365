package fleet

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/detourhq/detour/internal/text"
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
	parts := make([]string, len(c.Lists))
	for i, l := range c.Lists {
		parts[i] = fmt.Sprintf("[%s] (on %s)", strings.Join(l.Providers, " "), strings.Join(l.Processors, ", "))
	}
	return fmt.Sprintf("chain %q has different providers: %s", c.Chain, strings.Join(parts, " vs "))
}

// ChainConflicts returns the chain names that instances run with more
// than one list of providers (order counts: it is the fallback order),
// sorted by name.
func ChainConflicts(instances []Instance) []ChainConflict {
	byName := map[string]map[string]*HeldList{}
	for _, in := range instances {
		for name, providers := range in.Chains {
			if byName[name] == nil {
				byName[name] = map[string]*HeldList{}
			}
			joined := strings.Join(providers, ",")
			l := byName[name][joined]
			if l == nil {
				l = &HeldList{Providers: providers}
				byName[name][joined] = l
			}
			if !slices.Contains(l.Processors, in.Processor) {
				l.Processors = append(l.Processors, in.Processor)
			}
		}
	}
	var out []ChainConflict
	for name, lists := range byName {
		if len(lists) < 2 {
			continue
		}
		c := ChainConflict{Chain: name}
		for _, l := range lists {
			slices.Sort(l.Processors)
			c.Lists = append(c.Lists, *l)
		}
		sort.Slice(c.Lists, func(i, j int) bool {
			return strings.Join(c.Lists[i].Providers, ",") < strings.Join(c.Lists[j].Providers, ",")
		})
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Chain < out[j].Chain })
	return out
}

// ChainsInvolving returns the chain conflicts in which processor runs one
// of the lists.
func ChainsInvolving(conflicts []ChainConflict, processor string) []ChainConflict {
	return slices.DeleteFunc(slices.Clone(conflicts), func(c ChainConflict) bool {
		return !slices.ContainsFunc(c.Lists, func(l HeldList) bool { return slices.Contains(l.Processors, processor) })
	})
}

// WriteChainConflicts prints, after the table, each chain name that
// running processors run with different providers.
func WriteChainConflicts(w io.Writer, conflicts []ChainConflict) error {
	// Anyone who can write the bucket can write a record: what the records
	// hold reaches the terminal through text.Visible.
	for _, c := range conflicts {
		if _, err := fmt.Fprintf(w, "\nCONFLICT: chain %s has different providers on running processors (its requests go to either):\n", text.Visible(c.Chain)); err != nil {
			return err
		}
		for _, l := range c.Lists {
			processors := make([]string, len(l.Processors))
			for i, p := range l.Processors {
				processors[i] = text.Visible(p)
			}
			if _, err := fmt.Fprintf(w, "  [%s]  on %v\n", text.Visible(strings.Join(l.Providers, " ")), processors); err != nil {
				return err
			}
		}
	}
	return nil
}
