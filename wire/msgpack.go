package wire

import (
	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/internal/msgpackwalk"
)

// maxMsgpackDepth bounds the nesting of a msgpack body before it is
// decoded (100,000 levels decode into 33 MB): a request's response_schema,
// one level down, nests at most chain.MaxSchemaDepth, with a margin.
const maxMsgpackDepth = chain.MaxSchemaDepth + 8

// checkMsgpack refuses what msgpackwalk.Check refuses, nested deeper than
// maxMsgpackDepth.
func checkMsgpack(data []byte) error { return msgpackwalk.Check(data, maxMsgpackDepth) }
