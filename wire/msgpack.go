package wire

import (
	"github.com/vmihailenco/msgpack/v5"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/internal/msgpackwalk"
)

// maxMsgpackDepth bounds the nesting of a msgpack body before it is
// decoded (100,000 levels decode into 33 MB): a request's response_schema,
// one level down, nests at most chain.MaxSchemaDepth, with a margin.
const maxMsgpackDepth = chain.MaxSchemaDepth + 8

// unmarshalMsgpack decodes data after checkMsgpack has vouched for it.
func unmarshalMsgpack(data []byte, v any) error {
	if err := checkMsgpack(data); err != nil {
		return err
	}
	return msgpack.Unmarshal(data, v)
}

// checkMsgpack refuses what msgpackwalk.Check refuses, nested deeper than
// maxMsgpackDepth.
func checkMsgpack(data []byte) error { return msgpackwalk.Check(data, maxMsgpackDepth) }
