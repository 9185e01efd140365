package stream

import (
	"github.com/vmihailenco/msgpack/v5"

	"github.com/detourhq/detour/internal/msgpackwalk"
)

// maxMsgpackDepth bounds the nesting of a msgpack body, as encoding/json
// bounds JSON's, so that a body of nested arrays cannot exhaust the stack.
const maxMsgpackDepth = 10000

// unmarshalMsgpack decodes data after checkMsgpack has vouched for it.
func unmarshalMsgpack(data []byte, v any) error {
	if err := checkMsgpack(data); err != nil {
		return err
	}
	return msgpack.Unmarshal(data, v)
}

// checkMsgpack refuses msgpack that is truncated, nests deeper than
// maxMsgpackDepth, or declares more elements than it holds (see
// msgpackwalk.Check for why the decoder must not see such a body).
func checkMsgpack(data []byte) error {
	return msgpackwalk.Check(data, maxMsgpackDepth)
}
