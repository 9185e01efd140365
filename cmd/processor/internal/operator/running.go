package operator

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/detourhq/detour/cmd/processor/internal/fleet"
	"github.com/detourhq/detour/config"
)

// RunningFile is a chain file of the providers that running processors
// record (fleet.Running), for the commands run where no chain file is at
// hand (beside a demo): each provider's name, type, failure threshold and
// longest cooldown, sorted by name. Where processors define a name
// differently, the shortest longest cooldown counts, so that no processor
// cuts a trip short. nil when no processor recorded a provider.
func RunningFile(instances []fleet.Instance) *config.File {
	byName := map[string]config.Provider{}
	for _, in := range instances {
		for name, d := range in.Providers {
			longest := time.Duration(d.LongestCooldownS) * time.Second
			if longest <= 0 {
				continue // recorded by a processor too old to say it
			}
			if p, seen := byName[name]; seen && p.MaxCooldown <= longest {
				continue
			}
			byName[name] = config.Provider{Name: name, Type: config.ProviderType(d.Type), FailureThreshold: d.FailureThreshold, MaxCooldown: longest}
		}
	}
	if len(byName) == 0 {
		return nil
	}
	return &config.File{Providers: slices.SortedFunc(maps.Values(byName), func(a, b config.Provider) int { return strings.Compare(a.Name, b.Name) })}
}
