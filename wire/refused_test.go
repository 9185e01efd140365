package wire_test

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/detourhq/detour/wire"
)

// TestRefusedAddress: where the failed result of a refused request goes. The
// id and reply subject are read from whatever part of the body can be read;
// a reply subject the request may not name is never used.
func TestRefusedAddress(t *testing.T) {
	msgs := []any{map[string]any{"role": "user", "content": "hi"}}
	tests := []struct {
		name   string
		body   []byte
		header nats.Header
		want   wire.Address
		ok     bool
	}{
		{"json, bad metadata", []byte(`{"id":"q1","reply_to":"_INBOX.me.q1","metadata":{"n":{}},"messages":[]}`), nil,
			wire.Address{ID: "q1", ReplyTo: "_INBOX.me.q1", Encoding: wire.JSON}, true},
		{"json keys fold as encoding/json folds them", []byte(`{"ID":"q1","Reply_To":"_INBOX.me.q1"}`), nil,
			wire.Address{ID: "q1", ReplyTo: "_INBOX.me.q1", Encoding: wire.JSON}, true},
		{"msgpack, bad field", compactMsgpack(t, map[string]any{"id": "q2", "reply_to": "_INBOX.me.q2", "max_tokens": "x", "messages": msgs}), nil,
			wire.Address{ID: "q2", ReplyTo: "_INBOX.me.q2", Encoding: wire.MsgPack}, true},
		{"API reply subject", []byte(`{"id":"q3","reply_to":"$JS.API.STREAM.DELETE.X"}`), nil,
			wire.Address{ID: "q3", ReplyTo: "detour.results.q3", Encoding: wire.JSON}, true},
		{"another request's result subject", []byte(`{"id":"q4","reply_to":"detour.results.other"}`), nil,
			wire.Address{ID: "q4", ReplyTo: "detour.results.q4", Encoding: wire.JSON}, true},
		{"wildcard reply subject", []byte(`{"id":"q5","reply_to":"_INBOX.>"}`), nil,
			wire.Address{ID: "q5", ReplyTo: "detour.results.q5", Encoding: wire.JSON}, true},
		{"reply_to not a string: the header does not stand in", []byte(`{"id":"q6","reply_to":5}`), hdr(wire.HeaderReplyTo, "_INBOX.h"),
			wire.Address{ID: "q6", ReplyTo: "detour.results.q6", Encoding: wire.JSON}, true},
		{"reply subject from the header", []byte(`{"id":"q7","messages":5}`), hdr(wire.HeaderReplyTo, "_INBOX.h.7"),
			wire.Address{ID: "q7", ReplyTo: "_INBOX.h.7", Encoding: wire.JSON}, true},
		{"id from Nats-Msg-Id", []byte(`{"reply_to":"_INBOX.me.8","messages":5}`), hdr(wire.HeaderMsgID, "m-8"),
			wire.Address{ID: "m-8", ReplyTo: "_INBOX.me.8", Encoding: wire.JSON}, true},
		{"id from the sequence", []byte(`{"messages":5}`), nil,
			wire.Address{ID: "7", ReplyTo: "detour.results.7", Encoding: wire.JSON}, true},
		{"plain text with headers", []byte("hello there"), hdr(wire.HeaderMsgID, "m-9", wire.HeaderReplyTo, "_INBOX.h.9"),
			wire.Address{ID: "m-9", ReplyTo: "_INBOX.h.9", Encoding: wire.JSON}, true},
		{"truncated JSON", []byte(`{"id":"q10","reply_to":"_INBOX.x`), nil,
			wire.Address{ID: "7", ReplyTo: "detour.results.7", Encoding: wire.JSON}, true},
		{"unsupported Content-Type", []byte(`{"id":"q11","reply_to":"_INBOX.me.11"}`), hdr("Content-Type", "text/plain"),
			wire.Address{ID: "q11", ReplyTo: "_INBOX.me.11", Encoding: wire.JSON}, true},
		{"msgpack with a huge declared length", []byte{0x82, 0xa2, 'i', 'd', 0xa2, 'q', '2', 0xa1, 'x', 0xdd, 0xff, 0xff, 0xff, 0xff}, nil,
			wire.Address{ID: "7", ReplyTo: "detour.results.7", Encoding: wire.JSON}, true},
		// A Content-Type that names msgpack stands, whatever the body is.
		{"declared msgpack, JSON body", []byte(`{"id":"q12"}`), hdr("Content-Type", "application/msgpack", wire.HeaderMsgID, "m-12"),
			wire.Address{ID: "m-12", ReplyTo: "detour.results.m-12", Encoding: wire.MsgPack}, true},
		{"declared msgpack, truncated", []byte{0x82, 0xa2, 'i', 'd'}, hdr("Content-Type", "application/msgpack"),
			wire.Address{ID: "7", ReplyTo: "detour.results.7", Encoding: wire.MsgPack}, true},
		{"declared msgpack, empty", nil, hdr("Content-Type", "application/x-msgpack"),
			wire.Address{ID: "7", ReplyTo: "detour.results.7", Encoding: wire.MsgPack}, true},
		{"declared JSON, msgpack body", compactMsgpack(t, map[string]any{"id": "q13"}), hdr("Content-Type", "application/json"),
			wire.Address{ID: "7", ReplyTo: "detour.results.7", Encoding: wire.JSON}, true},
		{"id empty", []byte(`{"id":"","reply_to":"_INBOX.me"}`), hdr(wire.HeaderMsgID, "m-14"), wire.Address{}, false},
		// encoding/json would read these as U+FFFD: another id, maybe another request's.
		{"id not UTF-8", []byte("{\"id\":\"q\xff\",\"reply_to\":\"_INBOX.me\"}"), hdr(wire.HeaderMsgID, "m-17"), wire.Address{}, false},
		{"id with a lone surrogate", []byte(`{"id":"q\udc00","reply_to":"_INBOX.me"}`), hdr(wire.HeaderMsgID, "m-18"), wire.Address{}, false},
		{"not UTF-8 elsewhere", []byte("{\"id\":\"q19\",\"x\":\"\xff\"}"), nil,
			wire.Address{ID: "q19", ReplyTo: "detour.results.q19", Encoding: wire.JSON}, true},
		{"msgpack id empty", compactMsgpack(t, map[string]any{"id": ""}), hdr(wire.HeaderMsgID, "m-15"), wire.Address{}, false},
		{"id null falls back", []byte(`{"id":null,"reply_to":"_INBOX.me.16"}`), hdr(wire.HeaderMsgID, "m-16"),
			wire.Address{ID: "m-16", ReplyTo: "_INBOX.me.16", Encoding: wire.JSON}, true},
		{"id invalid", []byte(`{"id":"a.b","reply_to":"_INBOX.me"}`), nil, wire.Address{}, false},
		{"id not a string", []byte(`{"id":12,"reply_to":"_INBOX.me"}`), hdr(wire.HeaderMsgID, "m-12"), wire.Address{}, false},
		{"msgpack id not a string", compactMsgpack(t, map[string]any{"id": 12}), nil, wire.Address{}, false},
		{"invalid Nats-Msg-Id", []byte("hello"), hdr(wire.HeaderMsgID, "a b"), wire.Address{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			header := tt.header
			if header == nil {
				header = nats.Header{}
			}
			got, ok := wire.RefusedAddress(tt.body, header, 7, prefixes)
			if ok != tt.ok || got != tt.want {
				t.Fatalf("RefusedAddress = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
