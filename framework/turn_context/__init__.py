"""The per-turn context: the per-conversation state (queued notes, the active system prompt, what
was sent), notes delivered as a sidecar of the current user message, the active system prompt kept
byte-stable, compression safety (preflight) and the budget of what a request sends
(``docs/turn_context.md``)."""
