"""Provider requests: the exact body of an OpenAI Chat Completions, OpenAI Responses or Anthropic
Messages request from one turn context, and its submission (``docs/turn_context.md``).

The records are in :mod:`framework.providers.records`, the bodies in
:mod:`framework.providers.bodies` and :mod:`framework.providers.wire`, the prefix report in
:mod:`framework.providers.prefix`, building and submitting in
:mod:`framework.providers.request`, function tools (offering them, feeding back a round of calls
and results) in :mod:`framework.providers.tools`, and reading a response's text, tool calls and
token usage in :mod:`framework.providers.answers`.
"""
