"""Wire dialects: OpenAI Chat Completions, OpenAI Responses, Anthropic Messages."""
