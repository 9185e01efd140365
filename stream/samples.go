package stream

import (
	"bufio"
	"bytes"
	"fmt"
	"io"

	"github.com/detourhq/detour/chain"
)

// ReadSamples reads requests in the wire shape of DESIGN.md §3, one JSON
// object a line (blank lines skipped), for `processor check`. A bad line is
// reported with its number and nothing is returned.
func ReadSamples(r io.Reader) ([]chain.Request, error) {
	var out []chain.Request
	scanner := bufio.NewScanner(r)
	scanner.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for line := 1; scanner.Scan(); line++ {
		data := bytes.TrimSpace(scanner.Bytes())
		if len(data) == 0 {
			continue
		}
		d, err := DecodeRequest(data, nil, uint64(line), []string{ResultsPrefix})
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		req := chain.Request{ID: d.ID, Messages: d.Messages, MaxTokens: d.MaxTokens, Temperature: d.Temperature}
		if d.ResponseSchema != nil {
			if req.Schema, err = chain.CompileSchema(d.ResponseSchema); err != nil {
				return nil, fmt.Errorf("line %d: %w", line, err)
			}
		}
		out = append(out, req)
	}
	if err := scanner.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no samples")
	}
	return out, nil
}
