"""Provider requests: the exact body of an OpenAI Chat Completions, OpenAI Responses or Anthropic
Messages request from one turn context, and its submission (``docs/turn_context.md``).

The records are in :mod:`framework.providers.records`, the bodies in
:mod:`framework.providers.bodies` and :mod:`framework.providers.wire`, the prefix report in
:mod:`framework.providers.prefix`, and building and submitting in
:mod:`framework.providers.request`.
"""
