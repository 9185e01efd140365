// Package statuspage serves detour's live status page: "/" is one plain
// HTML page with a small script, no build step, that polls "/status.json"
// every second and counts each cooldown down between polls. It shows every
// provider's circuit state (closed, open, half-open), the time left in its
// cooldown, its consecutive failures, trips in the window, last error and
// an operator's cooldown or reset of it; the latest outage events; answers
// per second and the degraded share; and provider names that processors
// define differently. What it shows comes from the processor's
// provider-state mirror, so every processor shows the whole fleet's view,
// of the providers /metrics reports too: those of its chain file and a
// bounded number of others (metrics.ReportedProviders).
package statuspage
