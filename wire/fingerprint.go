package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// canonicalRequest is everything in a request that changes its answer,
// keys in sorted order; a field left out is null.
type canonicalRequest struct {
	MaxTokens      *int               `json:"max_tokens"`
	Messages       []canonicalMessage `json:"messages"`
	ResponseSchema map[string]any     `json:"response_schema"`
	Temperature    *float64           `json:"temperature"`
}

type canonicalMessage struct {
	Content string `json:"content"`
	Role    string `json:"role"`
}

// Fingerprint is the hex SHA-256 of the canonical JSON of the request's
// messages, max_tokens, temperature and response_schema (a field left out,
// or max_tokens 0, as null; keys sorted; docs/cache.md). It is "" when the
// schema cannot be written as JSON (msgpack keys that are not strings),
// which keeps such a request out of the cache.
func (d Decoded) Fingerprint() string {
	c := canonicalRequest{Messages: make([]canonicalMessage, len(d.Messages)),
		ResponseSchema: d.ResponseSchema, Temperature: d.Temperature}
	if d.MaxTokens != 0 {
		c.MaxTokens = &d.MaxTokens
	}
	for i, m := range d.Messages {
		c.Messages[i] = canonicalMessage{Content: m.Content, Role: m.Role}
	}
	data, err := json.Marshal(c)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
