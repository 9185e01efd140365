package chain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/detourhq/detour/internal/text"
)

// maxErrorText bounds a provider error message kept in results and state.
const maxErrorText = 300

// maxResponseBytes bounds how much of a provider's answer is read, so a
// misbehaving endpoint cannot exhaust memory.
const maxResponseBytes = 8 << 20

// OpenAI calls any OpenAI-compatible /chat/completions endpoint with plain
// net/http; it makes exactly one attempt per Call.
type OpenAI struct {
	name, baseURL, model, apiKey string
	client                       *http.Client
}

// NewOpenAI returns an adapter for baseURL (for example
// https://api.openai.com/v1). A nil client uses a shared pooled one.
func NewOpenAI(name, baseURL, model, apiKey string, client *http.Client) *OpenAI {
	if client == nil {
		client = DefaultHTTPClient
	}
	return &OpenAI{name: name, baseURL: strings.TrimRight(baseURL, "/"), model: model, apiKey: apiKey, client: client}
}

// Name returns the provider's name.
func (o *OpenAI) Name() string { return o.name }

// Model returns the configured model.
func (o *OpenAI) Model() string { return o.model }

type openAIRequest struct {
	Model       string    `json:"model"`
	Messages    []Message `json:"messages"`
	MaxTokens   int       `json:"max_tokens,omitempty"`
	Temperature *float64  `json:"temperature,omitempty"`
}

type openAIResponse struct {
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// Call sends one chat completion.
func (o *OpenAI) Call(ctx context.Context, req Request) (Response, error) {
	body, err := json.Marshal(openAIRequest{Model: o.model, Messages: req.Messages, MaxTokens: req.MaxTokens, Temperature: req.Temperature})
	if err != nil {
		return Response{}, &CallError{Class: ClassRequest, Err: err}
	}
	header := http.Header{"Content-Type": {"application/json"}}
	if o.apiKey != "" {
		header.Set("Authorization", "Bearer "+o.apiKey)
	}
	status, respHeader, data, err := post(ctx, o.client, o.baseURL+"/chat/completions", header, body)
	if err != nil {
		return Response{}, redact(err, o.apiKey)
	}
	if status/100 != 2 {
		return Response{}, httpFailure(status, respHeader, data, o.apiKey)
	}
	var out openAIResponse
	if err := json.Unmarshal(data, &out); err != nil {
		return Response{}, &CallError{Class: ClassInvalidOutput, StatusCode: status, Err: fmt.Errorf("malformed answer body: %w", err)}
	}
	resp := Response{Model: out.Model, Usage: Usage{PromptTokens: out.Usage.PromptTokens, CompletionTokens: out.Usage.CompletionTokens}}
	if len(out.Choices) > 0 {
		resp.Content = out.Choices[0].Message.Content
		resp.Truncated = out.Choices[0].FinishReason == "length"
	}
	return resp, nil
}

// DefaultHTTPClient is shared by adapters built without a client. It has no
// overall timeout: each attempt's context carries the provider's timeout. It
// never follows a redirect: net/http would resend a custom header such as
// x-api-key to wherever the redirect points, and a provider has no reason to
// redirect a POST (the 3xx is reported as a server failure).
var DefaultHTTPClient = &http.Client{
	Transport: func() http.RoundTripper {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 256
		return t
	}(),
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
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
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return 0, nil, nil, err
	}
	return resp.StatusCode, resp.Header, data, nil
}

// httpFailure builds the CallError for a non-2xx answer, keeping the status
// code even when the body is not the documented error shape.
func httpFailure(status int, header http.Header, body []byte, apiKey string) *CallError {
	retryAfter, _ := ParseRetryAfter(header.Get("Retry-After"), time.Now())
	msg := errorMessage(body)
	if apiKey != "" {
		// Redact before cutting short: a cut through the key would leave a
		// prefix of it that no longer matches.
		msg = strings.ReplaceAll(msg, apiKey, "[redacted]")
	}
	msg = text.Cut(msg, maxErrorText)
	return &CallError{Class: Classify(status), StatusCode: status, RetryAfter: retryAfter, Err: errors.New(msg)}
}

// errorMessage pulls a readable message out of the error bodies providers
// send: {"error":{"message":..}}, {"error":"text"}, or anything else. The
// caller redacts and then cuts it short.
func errorMessage(body []byte) string {
	var shaped struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &shaped) == nil && len(shaped.Error) > 0 {
		var text string
		if json.Unmarshal(shaped.Error, &text) == nil {
			return text
		}
		var obj struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(shaped.Error, &obj) == nil && obj.Message != "" {
			return obj.Message
		}
	}
	if s := strings.TrimSpace(string(body)); s != "" {
		return s
	}
	return "no error body"
}

// redact removes the API key from a transport error's text; the error is
// replaced, not wrapped, so no caller can print the original.
func redact(err error, apiKey string) error {
	var ce *CallError
	if apiKey == "" || errors.As(err, &ce) || !strings.Contains(err.Error(), apiKey) {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), apiKey, "[redacted]"), cause: err}
}

// redactedError keeps the cause for classification (Timeout, errors.Is on
// deadlines) while its text never shows the key.
type redactedError struct {
	msg   string
	cause error
}

func (e *redactedError) Error() string { return e.msg }

// Is and Timeout forward classification to the cause without exposing its text.
func (e *redactedError) Is(target error) bool { return errors.Is(e.cause, target) }

func (e *redactedError) Timeout() bool { return isTimeout(e.cause) }
