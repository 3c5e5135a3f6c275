"""The serving proxy: the model boundary every harness talks to (one request, one turn).

Wire dialects (OpenAI Chat Completions, OpenAI Responses, Anthropic Messages) are translated into
the normalized :class:`~coworkenv.proxy.messages.ChatRequest`; a :class:`~coworkenv.proxy.backends.
base.Backend` answers with a :class:`~coworkenv.proxy.backends.base.Completion` carrying the exact
token ids and logprobs; every call is recorded as a :class:`~coworkenv.proxy.capture.CapturedCall`.
"""
