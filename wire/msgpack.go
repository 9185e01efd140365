package wire

import (
	"github.com/vmihailenco/msgpack/v5"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/internal/msgpackwalk"
)

// maxMsgpackDepth bounds the nesting of a msgpack body before it is decoded,
// so that a body of nested arrays neither exhausts the stack nor makes the
// decoder build a value only to refuse it (100,000 levels decode into 33 MB).
// The deepest part of a request is its response_schema, one level below the
// root and at most chain.MaxSchemaDepth deep; a result nests three levels.
// The margin leaves room for fields yet to come.
const maxMsgpackDepth = chain.MaxSchemaDepth + 8

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
