package chain

import "testing"

// bodyKind is a real failure body, as a provider or gateway sent it in a
// public report or its documentation (source; a parenthesis where the
// words are a server's own), and the class the table must give it. Where
// a report shows the words but not the status, the status is one that
// providers send such words with.
type bodyKind struct {
	source string
	status int
	body   string
	want   Class
}

// TestEachKindOfBodyIsReadWhole tries the table against the failures that
// providers and gateways send, several of each kind, and from other
// providers than the ones each row was written from: the kind decides the
// class, not the provider nor, for 4xx, the status alone.
func TestEachKindOfBodyIsReadWhole(t *testing.T) {
	kinds := map[string][]bodyKind{
		"flagged or moderated input is the request's": {
			{"enricoros/big-AGI#352", 403, openRouterFlagged, ClassRequest},
			{"https://openrouter.ai/docs/api-reference/errors", 403,
				`{"error":{"code":403,"message":"anthropic/claude-3-5-haiku requires moderation on Amazon Bedrock. Your input was flagged for \"self-harm/intent\". No credits were charged.","metadata":{"reasons":["self-harm/intent"],"flagged_input":"..."}}}`, ClassRequest},
			{"openai/openai-python#331", 400,
				`{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please modify your prompt and retry.","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation"}}}`, ClassRequest},
			{"BerriAI/litellm#16231", 400,
				`{"error":{"message":"litellm.BadRequestError: litellm.ContentPolicyViolationError: AzureException - The response was filtered due to the prompt triggering Azure OpenAI's content management policy.","type":null,"param":null,"code":"400"}}`, ClassRequest},
			// "Please try again with a different prompt" names the request,
			// not a passing condition.
			{"alan-turing-institute/t0-1#69", 400,
				`{"error":{"message":"Invalid prompt: your prompt was flagged as potentially violating our usage policy. Please try again with a different prompt: https://platform.openai.com/docs/guides/reasoning#advice-on-prompting","type":"invalid_request_error","param":null,"code":"invalid_prompt"}}`, ClassRequest},
			// A flag in a 200 from a gateway is the request's too.
			{"https://openrouter.ai/docs/api-reference/errors", 200,
				`{"error":{"code":403,"message":"m requires moderation on OpenRouter. Your input was flagged for \"violence\".","metadata":{"reasons":["violence"]}}}`, ClassRequest},
		},
		"a request the credit left cannot pay is the request's": {
			{"Gitlawb/openclaude#1125", 402,
				`{"error":{"message":"This request requires more credits, or fewer max_tokens. You requested up to 32000 tokens, but can only afford 27342. To increase, visit https://openrouter.ai/settings/credits and upgrade to a paid account","code":402,"metadata":{"provider_name":null}}}`, ClassRequest},
			{"can1357/oh-my-pi#9569", 402,
				`{"error":{"message":"This request requires more credits, or fewer max_tokens. You requested up to 65536 tokens, but can only afford 12000.","code":402}}`, ClassRequest},
		},
		"a request larger than the rate limit itself is the request's, even in a 429": {
			{"vanderschaarlab/climb#1", 429, tooLargeForTPM, ClassRequest},
		},
		"a parameter or feature the model lacks is the request's": {
			{"FoundationAgents/MetaGPT#1709", 400,
				`{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}`, ClassRequest},
			{"dataelement/Clawith#357", 400, `{"error":{"code":"InvalidParameter","message":"Invalid messages at 1"}}`, ClassRequest},
			{"dnakov/anon-kode#2", 404,
				`{"error":{"message":"No endpoints found that support tool use. To learn more about provider routing, visit: https://openrouter.ai/docs/provider-routing","code":404}}`, ClassRequest},
			{"zed-industries/zed#36094", 404,
				`{"error":{"message":"No endpoints found that support the provided 'tool_choice' value. To learn more about provider routing, visit: https://openrouter.ai/docs/provider-routing","code":404}}`, ClassRequest},
			// "invalid parameter … please try again": the request, not capacity.
			{"(a gateway's own words)", 400, `{"error":{"message":"Invalid parameter: temperature. Please try again later with a valid value."}}`, ClassRequest},
		},
		"a refusal that quotes the request's own words is the request's": {
			// A client's word in a refused field must not read as the
			// provider's capacity: one request could then cool it.
			{"(OpenAI's invalid_request_error shape, quoting a field)", 400,
				`{"error":{"message":"Invalid value: 'overloaded, try again later'. Supported values are: 'none', 'auto' and 'required'.","type":"invalid_request_error","param":"tool_choice","code":"invalid_value"}}`, ClassRequest},
			{"(Google's INVALID_ARGUMENT shape, quoting a field)", 400,
				`{"error":{"code":400,"message":"Invalid JSON payload received. Unknown name \"temporarily unavailable\": Cannot find field.","status":"INVALID_ARGUMENT"}}`, ClassRequest},
		},
		"a context overflow is the request's": {
			{"crewAIInc/crewAI-examples#121", 400,
				`{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 8227 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, ClassRequest},
			{"sojohnnysaid/project-guide#2", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208656 tokens > 200000 maximum"}}`, ClassRequest},
			{"google-gemini/gemini-cli#4231", 400,
				`{"error":{"code":400,"message":"The input token count (3475108) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}`, ClassRequest},
		},
		"a refused key or a dead account is auth": {
			{"cequence-io/openai-scala-client#109", 400, googleKeyInvalid, ClassAuth},
			{"google-gemini/gemini-cli#25198", 400,
				`{"error":{"code":400,"message":"API Key not found. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`, ClassAuth},
			{"google/generative-ai-docs#356", 403,
				`{"error":{"code":403,"message":"Permission denied: Consumer 'api_key:AIza' has been suspended.","status":"PERMISSION_DENIED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"CONSUMER_SUSPENDED","domain":"googleapis.com"}]}}`, ClassAuth},
			{"continuedev/continue#12781", 403,
				`{"error":{"code":403,"message":"Requests to this API generativelanguage.googleapis.com method google.ai.generativelanguage.v1beta.GenerativeService.StreamGenerateContent are blocked.","status":"PERMISSION_DENIED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_SERVICE_BLOCKED"}]}}`, ClassAuth},
			// "… then retry" after enabling the API is the operator's to do.
			{"google-gemini/deprecated-generative-ai-python#10", 403,
				`{"error":{"code":403,"message":"Generative Language API has not been used in project 411082643095 before or it is disabled. Enable it by visiting https://console.developers.google.com/apis/api/generativelanguage.googleapis.com/overview?project=411082643095 then retry. If you enabled this API recently, wait a few minutes for the action to propagate to our systems and retry.","status":"PERMISSION_DENIED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"SERVICE_DISABLED"}]}}`, ClassAuth},
			{"google-gemini/gemini-cli#19501", 403,
				`[{"error":{"code":403,"message":"This service has been disabled in this account for violation of Terms of Service.","errors":[{"domain":"global","reason":"forbidden"}],"status":"PERMISSION_DENIED"}}]`, ClassAuth},
			{"google-gemini/gemini-cli#1614", 400, `{"error":{"code":400,"message":"User location is not supported for the API use.","status":"FAILED_PRECONDITION"}}`, ClassAuth},
			{"ChatGPTNextWeb/NextChat#4175", 401,
				`{"error":{"message":"The OpenAI account associated with this API key has been deactivated.","type":"invalid_request_error","param":null,"code":"account_deactivated"}}`, ClassAuth},
			{"anthropics/claude-code#60648", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"This organization has been disabled."}}`, ClassAuth},
			{"songquanpeng/one-api#271", 400, `{"error":{"message":"Organization has been restricted. Please reach out to support if you believe this was in error.","type":"invalid_request_error"}}`, ClassAuth},
			{"home-assistant/core#120072", 403,
				`{"error":{"code":"unsupported_country_region_territory","message":"Country, region, or territory not supported","param":null,"type":"request_forbidden"}}`, ClassAuth},
			{"https://docs.claude.com/en/api/errors", 403, `{"type":"error","error":{"type":"permission_error","message":"Your API key does not have permission to use the specified resource."}}`, ClassAuth},
		},
		"an account out of credit, quota or budget is auth": {
			{"Pythagora-io/gpt-pilot#340", 429,
				`{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`, ClassAuth},
			{"anthropics/claude-code#4684", 400,
				`{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}`, ClassAuth},
			{"Aider-AI/aider#4851", 402, `{"error":{"message":"Insufficient Balance","type":"unknown_error","param":null,"code":"invalid_request_error"}}`, ClassAuth},
			{"https://openrouter.ai/docs/api-reference/errors", 402, `{"error":{"code":402,"message":"Insufficient credits. Add more using https://openrouter.ai/credits"}}`, ClassAuth},
			{"BerriAI/litellm#36729", 429, `{"error":{"message":"Budget has been exceeded! Current cost: 10.51, Max budget: 10.00","type":"budget_exceeded","code":"429"}}`, ClassAuth},
			{"BerriAI/litellm#14144", 400,
				`{"error":{"message":"litellm.BadRequestError: OpenAIException - Budget has been exceeded! Current cost: 14.2, Max budget: 100.","type":null,"param":null,"code":"400"}}`, ClassAuth},
		},
		"a bare 402, 403 or 404 is counted like a server failure": {
			{"(the status text alone)", 402, `{"error":{"message":"Payment Required","code":402}}`, ClassServer},
			{"(the status text alone)", 403, `{"error":{"message":"Forbidden"}}`, ClassServer},
			{"cloudflare/har-sanitizer#57", 403, `<!DOCTYPE html><html><head><title>Attention Required! | Cloudflare</title></head><body>Sorry, you have been blocked</body></html>`, ClassServer},
			{"(Go's net/http)", 404, "404 page not found\n", ClassServer},
			{"https://docs.claude.com/en/api/errors", 404, `{"type":"error","error":{"type":"not_found_error","message":"model: claude-x"}}`, ClassServer},
			{"https://cloud.google.com/apis/design/errors", 404,
				`{"error":{"code":404,"message":"models/gemini-x is not found for API version v1beta, or is not supported for generateContent.","status":"NOT_FOUND"}}`, ClassServer},
			{"(the OpenAI flavour)", 404, `{"error":{"message":"The model m does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`, ClassServer},
			// A missing model in a 400 is the provider's set-up, not this request's.
			{"(a gateway's 400)", 400, `{"error":{"message":"m","type":"invalid_request_error","code":"model_not_found"}}`, ClassServer},
		},
		"capacity or a passing condition is retried and counted": {
			{"chatboxai/chatbox#2743", 404, `{"error":{"message":"No endpoints found for deepseek/deepseek-chat-v3.1:free.","code":404}}`, ClassServer},
			{"microsoft/chat-copilot#682", 404,
				`{"error":{"code":"DeploymentNotFound","message":"The API deployment for this resource does not exist. If you created the deployment within the last 5 minutes, please wait a moment and try again."}}`, ClassServer},
			{"Wei-Shaw/sub2api#5827", 400, `{"error":{"message":"our servers are currently overloaded. Please try again later"}}`, ClassServer},
			{"openai/codex#19446", 400, `{"error":{"message":"Selected model is at capacity. Please try a different model."}}`, ClassServer},
			{"huggingface/unity-api#18", 503, `{"error":"Model distilbert-base-cased-distilled-squad is currently loading","estimated_time":20.0}`, ClassServer},
			{"huggingface/unity-api#18", 400, `{"error":"Model m is currently loading","estimated_time":20.0}`, ClassServer},
			{"https://docs.claude.com/en/api/errors", 200, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, ClassServer},
			// A 429 naming capacity stays a rate limit, so does a 200 with 429 inside.
			{"BerriAI/litellm#3933", 429,
				`{"error":{"message":"No deployments available for selected model, Try again in 60 seconds. Passed model=gemini-1.5-pro-001.","type":null,"param":null,"code":"429"}}`, ClassRateLimit},
			{"NousResearch/hermes-agent#95002", 429,
				`{"error":{"message":"The requested model is temporarily at capacity upstream. This is not your API key's rate limit — please retry shortly","code":429}}`, ClassRateLimit},
			{"google-gemini/gemini-cli#27548", 429,
				`{"error":{"code":429,"message":"No capacity available for model gemini-3.1-flash-lite on the server","errors":[{"reason":"rateLimitExceeded"}],"status":"RESOURCE_EXHAUSTED"}}`, ClassRateLimit},
			{"(a gateway's 200)", 200, `{"error":{"message":"Provider overloaded, please retry shortly","code":429}}`, ClassRateLimit},
		},
		"a rate limit that speaks of credit or tokens stays a rate limit": {
			{"Gitlawb/openclaude#936", 429, openRouterDailyLimit, ClassRateLimit},
			// Bedrock's throttling names tokens, not the request's size,
			// also where a gateway relays it with another status.
			{"anthropics/claude-code#236", 429, `{"message":"Too many tokens, please wait before trying again."}`, ClassRateLimit},
			{"anthropics/claude-code#236", 500, `{"error":{"message":"Too many tokens, please wait before trying again."}}`, ClassServer},
			{"songquanpeng/one-api#1775", 429,
				`{"error":{"code":429,"message":"Quota exceeded for quota metric 'Generate Content API requests per minute' and limit 'GenerateContent request limit per minute for a region' of service 'generativelanguage.googleapis.com' for consumer 'project_number:297700366322'.","status":"RESOURCE_EXHAUSTED"}}`, ClassRateLimit},
		},
		"an upstream error relayed by a gateway is read": {
			{"langgenius/dify#25946", 400,
				`{"error":{"message":"Provider returned error","code":400,"metadata":{"raw":"{\n \"error\": {\n \"code\": 400,\n \"message\": \"User location is not supported for the API use.\",\n \"status\": \"FAILED_PRECONDITION\"\n }\n}\n","provider_name":"Google AI Studio"}}}`, ClassAuth},
			{"musistudio/claude-code-router#251", 404,
				`{"error":{"message":"Error from provider: {\"error\":{\"message\":\"No endpoints found that support cache control\",\"code\":404}}","type":"api_error","code":"provider_response_error"}}`, ClassRequest},
		},
	}
	for kind, bodies := range kinds {
		for _, b := range bodies {
			u := decodeErrorBody([]byte(b.body))
			if got := classifyBody(b.status, u); got != b.want {
				t.Errorf("%s: %s, %d %s: class %s, want %s", kind, b.source, b.status, b.body, got, b.want)
			}
		}
	}
}
