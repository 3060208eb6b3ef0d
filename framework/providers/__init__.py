"""Provider requests: the exact body of an OpenAI Chat Completions, OpenAI Responses or Anthropic
Messages request from one turn context, and its submission (``docs/turn_context.md``).

The records are in :mod:`promptweave.providers.exchange`, the bodies in
:mod:`promptweave.providers.bodies` and :mod:`promptweave.providers.wire`, the prefix report in
:mod:`promptweave.providers.prefix`, building and submitting in
:mod:`promptweave.providers.request`, function tools (offering them, feeding back a round of calls
and results) in :mod:`promptweave.providers.tools`, and reading a response's text, tool calls and
token usage in :mod:`promptweave.providers.answers`.
"""
