// Package chains builds the chains a chain file describes: one adapter per
// provider (OpenAI, Anthropic, rules), each with the retry and cooldown
// policy of its chain-file keys, strung into the chains that name them. The
// processor runs them; `processor check` runs them without outage memory.
package chains
