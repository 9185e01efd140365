package providertest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
)

// ErrorShape is how an error document is laid out. Gateways in front of the
// real services answer in shapes of their own, and a client must read them all.
type ErrorShape int

const (
	// ShapeFlavor is the flavour's own document: OpenAI's
	// {"error":{"message","type","param","code"}} or Anthropic's
	// {"type":"error","error":{"type","message"}}.
	ShapeFlavor ErrorShape = iota
	// ShapeString is {"error":"message"}, as some OpenAI-compatible servers
	// send, with Hugging Face's estimated_time beside it when
	// Reply.EstimatedTime is set.
	ShapeString
	// ShapeGateway is {"error":{"message":...,"code":429}}: the code is
	// Reply.ErrorCode, or the status as a number ("type" is added when
	// Reply.ErrorType is set, "metadata" when Reply.ErrorMetadata is).
	ShapeGateway
	// ShapeGoogle is Google's {"error":{"code":429,"message":...,
	// "status":"RESOURCE_EXHAUSTED","details":[...]}}, with a
	// google.rpc.ErrorInfo detail when Reply.ErrorReason is set and a
	// google.rpc.RetryInfo detail when Reply.RetryDelay is set.
	ShapeGoogle
)

// errorDocument is the error body for status laid out as r asks (shape,
// type, code, retry delay, array), in the flavour's words by default.
func (f Flavor) errorDocument(status int, r Reply) []byte {
	message := cmp.Or(r.ErrorMessage, fmt.Sprintf("providertest: scripted %d %s", status, statusText(status)))
	var v any
	switch r.ErrorShape {
	case ShapeString:
		doc := map[string]any{"error": message}
		if r.EstimatedTime > 0 {
			doc["estimated_time"] = r.EstimatedTime
		}
		v = doc
	case ShapeGateway:
		detail := map[string]any{"message": message, "code": status}
		if r.ErrorCode != nil {
			detail["code"] = r.ErrorCode
		}
		if r.ErrorType != "" {
			detail["type"] = r.ErrorType
		}
		if r.ErrorMetadata != nil {
			detail["metadata"] = r.ErrorMetadata
		}
		v = map[string]any{"error": detail}
	case ShapeGoogle:
		details := []any{}
		if r.ErrorReason != "" {
			details = append(details, map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": r.ErrorReason, "domain": "googleapis.com"})
		}
		if r.RetryDelay != "" {
			details = append(details, map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": r.RetryDelay})
		}
		v = map[string]any{"error": map[string]any{
			"code": status, "message": message, "status": cmp.Or(r.ErrorType, googleStatuses.of(status)), "details": details,
		}}
	default:
		if f == Anthropic {
			v = map[string]any{"type": "error", "error": map[string]any{"type": cmp.Or(r.ErrorType, anthropicErrorTypes.of(status)), "message": message}}
			break
		}
		e := openAIErrors.of(status)
		if r.ErrorCode != nil {
			e.code = r.ErrorCode
		}
		v = map[string]any{"error": map[string]any{"message": message, "type": cmp.Or(r.ErrorType, e.typ), "param": nil, "code": e.code}}
	}
	if r.ErrorArray {
		v = []any{v}
	}
	b, err := json.Marshal(v)
	if err != nil {
		// Only an ErrorCode that JSON cannot encode gets here: say so in
		// the body, where the test will see it.
		return fmt.Appendf(nil, `{"error":{"message":%q}}`, "providertest: ErrorCode: "+err.Error())
	}
	return b
}

// googleStatuses are the google.rpc.Code names Google's APIs send with a
// status.
var googleStatuses = statusNames[string]{map[int]string{
	http.StatusBadRequest: "INVALID_ARGUMENT", http.StatusUnauthorized: "UNAUTHENTICATED",
	http.StatusForbidden: "PERMISSION_DENIED", http.StatusNotFound: "NOT_FOUND",
	http.StatusTooManyRequests: "RESOURCE_EXHAUSTED", http.StatusServiceUnavailable: "UNAVAILABLE",
	http.StatusGatewayTimeout: "DEADLINE_EXCEEDED",
}, "INTERNAL", "FAILED_PRECONDITION"}
