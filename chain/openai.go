package chain

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"strings"

	"github.com/detourhq/detour/internal/text"
)

// maxErrorText bounds a provider error message kept in results and state.
const maxErrorText = 300

// maxResponseBytes bounds how much of a provider's answer is read, so a
// misbehaving endpoint cannot exhaust memory.
const maxResponseBytes = 8 << 20

// adapter is what the HTTP adapters share: one attempt per Call, with
// plain net/http. Its flavour writes the request and reads the answer.
type adapter struct {
	name, endpoint, model, apiKey string
	client                        *http.Client
	// encode returns the request's body, sent as JSON, and its headers
	// but Content-Type.
	encode func(a *adapter, req *Request) (any, http.Header)
	// decode reads a 2xx answer: the answer, the part of the body beside
	// the top level that may hold an error object that ended it (nil for
	// none), and the first decoding failure.
	decode func(body []byte) (Response, json.RawMessage, error)
}

// newAdapter resolves path under baseURL; a nil client is DefaultHTTPClient.
func newAdapter(name, baseURL, path, model, apiKey string, client *http.Client,
	encode func(*adapter, *Request) (any, http.Header), decode func([]byte) (Response, json.RawMessage, error)) adapter {
	if client == nil {
		client = DefaultHTTPClient
	}
	return adapter{name: name, endpoint: endpoint(baseURL, path), model: model, apiKey: apiKey, client: client, encode: encode, decode: decode}
}

// Name returns the provider's name.
func (a *adapter) Name() string { return a.name }

// Model returns the configured model.
func (a *adapter) Model() string { return a.model }

// OpenAI calls any OpenAI-compatible /chat/completions endpoint; it makes
// exactly one attempt per Call.
type OpenAI struct{ adapter }

// NewOpenAI returns an adapter for baseURL (for example
// https://api.openai.com/v1). A nil client uses DefaultHTTPClient.
func NewOpenAI(name, baseURL, model, apiKey string, client *http.Client) *OpenAI {
	return &OpenAI{newAdapter(name, baseURL, "/chat/completions", model, apiKey, client, encodeOpenAI, decodeOpenAIAnswer)}
}

type openAIRequest struct {
	Model       string    `json:"model"`
	Messages    []Message `json:"messages"`
	MaxTokens   int       `json:"max_tokens,omitempty"`
	Temperature *float64  `json:"temperature,omitempty"`
}

// The levels of an answer, decoded one after the other.
type openAIResponse struct {
	Model   looseString       `json:"model"`
	Choices []json.RawMessage `json:"choices"`
	Usage   json.RawMessage   `json:"usage"`
}

type openAIUsage struct {
	PromptTokens     tokenCount `json:"prompt_tokens"`
	CompletionTokens tokenCount `json:"completion_tokens"`
}

type openAIChoice struct {
	Message      json.RawMessage `json:"message"`
	FinishReason looseString     `json:"finish_reason"`
}

type openAIMessage struct {
	Content string       `json:"content"`
	Refusal *looseString `json:"refusal"`
}

// encodeOpenAI writes one chat completion request.
func encodeOpenAI(a *adapter, req *Request) (any, http.Header) {
	header := http.Header{}
	if a.apiKey != "" {
		header.Set("Authorization", "Bearer "+a.apiKey)
	}
	return openAIRequest{Model: a.model, Messages: req.Messages, MaxTokens: req.MaxTokens, Temperature: req.Temperature}, header
}

// Call makes one attempt: it posts the flavour's request and reads its
// answer.
func (a *adapter) Call(ctx context.Context, req *Request) (Response, error) {
	payload, header := a.encode(a, req)
	body, err := json.Marshal(payload)
	if err != nil {
		return Response{}, &CallError{Class: ClassRequest, Err: err}
	}
	header.Set("Content-Type", "application/json")
	status, respHeader, data, err := post(ctx, a.client, a.endpoint, header, body)
	if err != nil {
		return Response{}, redact(err, a.apiKey)
	}
	if status/100 != 2 {
		return Response{}, bodyFailure(status, respHeader, data, a.apiKey)
	}
	resp, choice, decodeErr := a.decode(data)
	redactAnswer(&resp, a.apiKey)
	if err := refuse(&resp, decodeErr, choice, status, respHeader, data, a.apiKey); err != nil {
		return Response{}, err
	}
	return resp, nil
}

// decodeOpenAIAnswer reads a chat completion's model, usage and first
// choice, and returns that choice as sent (an error object that ended it
// may be there, OpenRouter's) and the first decoding failure. It decodes a
// level at a time (decodeLevel): the content's three levels at once took a
// worker's stack past 8 KiB. Every choice is decoded, so a malformed one
// fails the answer as in one pass. Of a member repeated in one object (RFC
// 8259, section 4), the last counts.
func decodeOpenAIAnswer(data []byte) (Response, json.RawMessage, error) {
	var out openAIResponse
	decodeErr := json.Unmarshal(data, &out)
	var usage openAIUsage
	decodeUsage(out.Usage, &usage)
	resp := Response{Model: string(out.Model), Usage: reportedUsage(int(usage.PromptTokens), int(usage.CompletionTokens))}
	var first json.RawMessage
	for i, raw := range out.Choices {
		var choice openAIChoice
		var msg openAIMessage
		decodeLevel(raw, &choice, &decodeErr)
		decodeLevel(choice.Message, &msg, &decodeErr)
		if i > 0 {
			continue
		}
		first = raw
		resp.Content, resp.StopReason = msg.Content, string(choice.FinishReason)
		resp.Complete = stopIn(openAIComplete, resp.StopReason)
		// The API sends "refusal": null on every answer; some gateways "".
		if r := msg.Refusal; r != nil && !isBlank(string(*r)) {
			resp.Refusal = string(*r)
			if resp.Complete {
				resp.StopReason, resp.Complete = stopRefusal, false
			}
		}
	}
	return resp, first, decodeErr
}

// DefaultHTTPClient is shared by adapters built without a client. It has no
// overall timeout (each attempt's context has the provider's), and follows
// no redirect: net/http would resend x-api-key wherever it points, and a
// provider has no reason to redirect a POST (a 3xx is a server failure).
var DefaultHTTPClient = &http.Client{
	Transport: func() http.RoundTripper {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 256
		return t
	}(),
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// endpoint is the URL of path under baseURL, keeping its query (Azure
// OpenAI's api-version).
func endpoint(baseURL, path string) string {
	u, err := neturl.Parse(baseURL)
	if err != nil { // checked by the chain file; from Go, the call reports it
		return strings.TrimRight(baseURL, "/") + path
	}
	u.Path = strings.TrimRight(u.Path, "/") + path
	u.RawPath = ""
	return u.String()
}

// post sends one request and reads the whole (bounded) answer.
func post(ctx context.Context, client *http.Client, url string, header http.Header, body []byte) (int, http.Header, []byte, error) {
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, &CallError{Class: ClassRequest, Err: err}
	}
	httpReq.Header = header
	resp, err := client.Do(httpReq)
	if err != nil {
		if ue, ok := errors.AsType[*neturl.Error](err); ok {
			ue.URL = text.URL(ue.URL) // a base_url's user part or query may carry a key
		}
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	status, ok := resp.StatusCode, resp.StatusCode/100 == 2
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	switch {
	case err != nil && undecodable(err) && ok:
		// The provider answered; a body that is not the encoding it
		// names would come back the same from another call.
		return 0, nil, nil, &CallError{Class: ClassInvalidOutput, StatusCode: status, Err: fmt.Errorf("malformed answer body: %w", err)}
	case err != nil && undecodable(err):
		return status, resp.Header, nil, nil // the status alone classes it
	case err != nil:
		return 0, nil, nil, err
	case len(data) > maxResponseBytes && ok:
		return 0, nil, nil, &CallError{Class: ClassInvalidOutput, StatusCode: status,
			Err: fmt.Errorf("answer body over %d MiB, more than is read", maxResponseBytes>>20)}
	case len(data) > maxResponseBytes:
		data = data[:maxResponseBytes] // only its start is shown
	}
	return status, resp.Header, bytes.TrimPrefix(data, byteOrderMark), nil
}

// byteOrderMark is UTF-8's, which RFC 8259 (section 8.1) lets a reader of
// JSON ignore; before an HTML page it would hide the page for what it is.
var byteOrderMark = []byte("\ufeff")

// undecodable reports a body that the transport could not decode from the
// Content-Encoding it names (gzip, which net/http undoes by itself): the
// connection worked, the bytes are wrong.
func undecodable(err error) bool {
	var corrupt flate.CorruptInputError
	return errors.Is(err, gzip.ErrHeader) || errors.Is(err, gzip.ErrChecksum) || errors.As(err, &corrupt)
}

// bodyFailure builds the CallError an error body reports: the status's
// class unless the body overrides it (bodyRules), the longest wait hint,
// and the body's text. In a 2xx answer, where gateways send an error
// object, it is classed by its embedded code or type, and nil when there is
// none; adapters ask only when the body has no answer (refuse).
func bodyFailure(status int, header http.Header, body []byte, apiKey string) *CallError {
	u := decodeErrorBody(body)
	msg := u.text()
	if status/100 == 2 {
		if !u.found {
			return nil
		}
		msg = fmt.Sprintf("error in the %d answer (%s): %s", status, u.label(), msg)
	}
	return &CallError{
		Class: classifyBody(status, u), StatusCode: status, RetryAfter: waitHint(header, u, answeredAt(header)),
		Err: errors.New(errorText(msg, apiKey)),
	}
}

// errorText makes outside text fit for results and state: redacted, then
// cut (a cut through the key would leave a prefix no longer matching).
func errorText(msg, apiKey string) string { return text.Cut(redactKey(msg, apiKey), maxErrorText) }
