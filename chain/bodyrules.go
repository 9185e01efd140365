package chain

// bodyRule is one row of the table that reads a failure's class from the
// error body as well as the status. docs/failures.md reproduces the table
// row by row (see markdownRow); a test keeps the two equal.
type bodyRule struct {
	// description says when the rule holds, in the words of the docs.
	description string
	// class is what the rule gives; ClassNone means the class of the
	// embedded numeric code, through Classify.
	class Class
	// counted makes class give way to the status's own class when that is
	// retried too (429 rate_limit, 408 timeout; in a 2xx, the embedded
	// code's): the body says the failure passes, the status says how.
	counted bool
	// inAnswer limits the rule to an error object inside a 2xx answer; the
	// other rules override a non-2xx status's class as well.
	inAnswer bool
	// names match the body's type, code, status or reason fields, ignoring
	// case (upstreamError.names).
	names []string
	// flagged matches a body that lists the categories its input was
	// flagged for (OpenRouter's metadata.reasons).
	flagged bool
	// phrases match the message, ignoring case, unless the status or body
	// names a rate limit and the rule is neither counted nor limitWords
	// (see rateLimited).
	phrases []string
	// limitWords marks phrases that only a rate limiter writes, read in a
	// body that names a rate limit too.
	limitWords bool
	// numericCode matches an embedded code from 400 to 599.
	numericCode bool
	// anyError matches whatever error object the body holds.
	anyError bool
	// unlessNamed are names that keep the rule from holding.
	unlessNamed []string
	// sources are where the rule's words come from: the provider's
	// documentation (a URL) or a public report that shows the body
	// ("owner/repo#N", a GitHub issue or pull request).
	sources []string
}

// rateLimitNames are the type, code, status and reason values that name a
// rate limit.
var rateLimitNames = []string{"rate_limit_error", "rate_limit_exceeded", "RESOURCE_EXHAUSTED", "rate_limited", "too_many_requests", "rateLimitExceeded"}

// bodyRules is the table, first match wins, in the order docs/failures.md
// explains: at any status, what names the request (which must not cool the
// provider for everyone), the credential or the account, a passing
// condition; then, inAnswer, an error object sent with a 2xx in place of an
// answer. For any other non-2xx status the status's class stands.
var bodyRules = []bodyRule{
	{
		description: `says the input was flagged by moderation or a content filter (message "Your input was flagged…", "…content management policy…", …)`,
		class:       ClassRequest,
		names:       []string{"content_filter", "content_policy_violation", "ResponsibleAIPolicyViolation", "invalid_prompt"},
		flagged:     true,
		phrases: []string{"input was flagged", "prompt was flagged", "flagged as potentially violating", "requires moderation",
			"content management policy", "contentpolicyviolation"},
		sources: []string{"https://openrouter.ai/docs/api-reference/errors", "enricoros/big-AGI#352", "openai/openai-python#331",
			"alan-turing-institute/t0-1#69", "BerriAI/litellm#16231"},
	},
	{
		description: `says the request asks for more tokens than the credit left pays for (message "…requires more credits, or fewer max_tokens…", "…can only afford…")`,
		class:       ClassRequest,
		phrases:     []string{"fewer max_tokens", "can only afford"},
		sources:     []string{"Gitlawb/openclaude#1125", "can1357/oh-my-pi#9569"},
	},
	{
		description: `says the prompt is longer than the context window (message "maximum context length", "prompt is too long", "context window", …)`,
		class:       ClassRequest,
		names:       []string{"context_length_exceeded", "context_window_exceeded", "model_context_window_exceeded", "prompt_too_long", "input_too_long"},
		phrases: []string{"maximum context length", "context length", "context window", "context limit", "exceeds the context",
			"prompt is too long", "prompt too long", "input is too long", "input too long", "too many input tokens",
			"number of tokens in the prompt cannot exceed",
			"input token count", "reduce the length of the messages"},
		sources: []string{"crewAIInc/crewAI-examples#121", "sojohnnysaid/project-guide#2", "google-gemini/gemini-cli#4231"},
	},
	{
		description: `says the request alone is larger than the rate limit lets through (message "Request too large for … on tokens per min (TPM): Limit 30000, Requested 30601. The input or output tokens must be reduced…"), even in a 429`,
		class:       ClassRequest,
		phrases:     []string{"request too large for", "must be reduced in order to run successfully"},
		limitWords:  true,
		sources:     []string{"vanderschaarlab/climb#1"},
	},
	{
		description: `names a parameter the model does not take, or a feature no endpoint of it supports (message "Unsupported parameter…", "No endpoints found that support tool use", …)`,
		class:       ClassRequest,
		names:       []string{"unsupported_parameter", "unsupported_value", "InvalidParameter"},
		phrases: []string{"unsupported parameter", "unsupported value", "invalid parameter",
			"no endpoints found that support", "no endpoints found that can handle"},
		sources: []string{"FoundationAgents/MetaGPT#1709", "dataelement/Clawith#357", "dnakov/anon-kode#2", "zed-industries/zed#36094"},
	},
	{
		description: `names the credential or the account: a key that is invalid, expired, blocked or suspended, an account or organisation deactivated or disabled, a region it may not be used from (message "API key not valid…", "…has been suspended", "This organization has been disabled.", …)`,
		class:       ClassAuth,
		names: []string{"invalid_api_key", "authentication_error", "UNAUTHENTICATED", "API_KEY_INVALID", "API_KEY_SERVICE_BLOCKED",
			"CONSUMER_SUSPENDED", "SERVICE_DISABLED", "account_deactivated", "unsupported_country_region_territory"},
		phrases: []string{"api key not valid", "api key not found", "api key expired", "invalid api key", "incorrect api key",
			"api key was reported as leaked", "your api key does not have permission", "has been suspended", "been deactivated",
			"deactivated account", "organization has been disabled", "organization has been restricted", "disabled in this account",
			"country, region, or territory not supported", "location is not supported"},
		sources: []string{"https://docs.claude.com/en/api/errors", "cequence-io/openai-scala-client#109", "google/generative-ai-docs#356",
			"continuedev/continue#12781", "google-gemini/deprecated-generative-ai-python#10", "google-gemini/gemini-cli#19501",
			"ChatGPTNextWeb/NextChat#4175", "anthropics/claude-code#60648", "songquanpeng/one-api#271", "home-assistant/core#120072", "google-gemini/gemini-cli#1614"},
	},
	// A 402's own text ("Payment Required", which gateways put in the
	// message) is the status's, not the body's: no word of this row.
	{
		description: `says the account is out of credit, quota or budget (message "You exceeded your current quota…", "Your credit balance is too low…", "Budget has been exceeded!", …)`,
		class:       ClassAuth,
		names: []string{"insufficient_quota", "billing_hard_limit_reached", "billing_not_active", "billing_error",
			"insufficient_balance", "insufficient_credits", "insufficient_funds", "budget_exceeded"},
		phrases: []string{"exceeded your current quota", "credit balance", "insufficient credit", "insufficient balance",
			"insufficient funds", "insufficient quota", "out of credit", "credit limit", "billing details", "billing hard limit",
			"billing is not active", "billing not active", "budget has been exceeded", "exceeded budget", "over budget"},
		sources: []string{"Pythagora-io/gpt-pilot#340", "anthropics/claude-code#4684", "continuedev/continue#9942",
			"https://openrouter.ai/docs/api-reference/errors", "BerriAI/litellm#36729", "BerriAI/litellm#14144"},
	},
	{
		description: "names a refused permission, or a model or deployment not found, without naming the credential",
		class:       ClassServer,
		counted:     true,
		names:       []string{"permission_error", "PERMISSION_DENIED", "not_found_error", "NOT_FOUND", "model_not_found", "NotFoundError", "DeploymentNotFound"},
		sources:     []string{"https://docs.claude.com/en/api/errors", "https://cloud.google.com/apis/design/errors", "microsoft/chat-copilot#682"},
	},
	{
		description: `says the provider is overloaded, out of capacity or not ready, or asks to try again later (message "overloaded", "No endpoints found for…", "…is currently loading", …), unless it names a malformed request (` + "`invalid_request_error`, `INVALID_ARGUMENT`" + `): a refusal of a request may quote its words, and no request may be worded so that its refusal cools the provider`,
		class:       ClassServer,
		counted:     true,
		unlessNamed: []string{"invalid_request_error", "INVALID_ARGUMENT"},
		names:       []string{"overloaded_error", "UNAVAILABLE", "service_unavailable", "ServiceUnavailableException", "ModelNotReadyException"},
		phrases: []string{"overloaded", "over capacity", "at capacity", "capacity exceeded", "no capacity", "high demand",
			"try again later", "retry later", "retry shortly", "retry your request", "wait a moment and try again",
			"temporarily unavailable", "currently unavailable", "no endpoints found", "no deployments available",
			"no healthy deployment", "currently loading", "model is loading", "not ready to serve"},
		sources: []string{"https://docs.claude.com/en/api/errors", "Wei-Shaw/sub2api#5827", "openai/codex#19446", "NousResearch/hermes-agent#95002",
			"chatboxai/chatbox#2743", "BerriAI/litellm#3933", "BerriAI/litellm#2493", "huggingface/unity-api#18", "microsoft/chat-copilot#682",
			"https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InvokeModel.html"},
	},
	{
		description: "has a numeric code from 400 to 599",
		inAnswer:    true,
		numericCode: true,
		sources:     []string{"https://openrouter.ai/docs/api-reference/errors"},
	},
	{
		description: "names a rate limit",
		class:       ClassRateLimit,
		inAnswer:    true,
		names:       rateLimitNames,
		sources:     []string{"https://docs.claude.com/en/api/errors", "https://cloud.google.com/apis/design/errors", "google-gemini/gemini-cli#27548"},
	},
	{
		description: "names a server fault",
		class:       ClassServer,
		inAnswer:    true,
		names:       []string{"api_error", "server_error", "internal_error", "INTERNAL"},
		sources:     []string{"https://docs.claude.com/en/api/errors", "https://cloud.google.com/apis/design/errors"},
	},
	{
		description: "names a timeout",
		class:       ClassTimeout,
		inAnswer:    true,
		names:       []string{"DEADLINE_EXCEEDED", "timeout", "timeout_error", "request_timeout"},
		sources:     []string{"https://cloud.google.com/apis/design/errors"},
	},
	{
		description: "names a malformed or oversized request",
		class:       ClassRequest,
		inAnswer:    true,
		names:       []string{"invalid_request_error", "request_too_large", "INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE"},
		sources:     []string{"https://docs.claude.com/en/api/errors", "https://cloud.google.com/apis/design/errors"},
	},
	{
		description: "holds any other error object",
		class:       ClassServer,
		inAnswer:    true,
		anyError:    true,
		sources:     []string{"https://openrouter.ai/docs/api-reference/errors"},
	},
}
