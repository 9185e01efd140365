package providertest

import (
	"net/http"
	"testing"
)

// FuzzDecodeRequest feeds arbitrary bodies to the decoder, which reads
// whatever a client sends: it must refuse, never panic.
func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`))
	f.Add([]byte(`{"model":"m","max_tokens":5,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}]}`))
	f.Add([]byte(`{"messages":[{"content":null}],"temperature":null}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeRequest(body, http.Header{"X-Api-Key": {"k"}})
		if err != nil {
			return
		}
		for _, fl := range []Flavor{OpenAI, Anthropic} {
			_ = validate(fl, req)
		}
		_ = req.clone()
	})
}
