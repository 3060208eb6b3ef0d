"""Background compression: the old rows of a long session replaced by a summary row after delivery
(``docs/messages.md#long-session-compression``).

- :mod:`promptweave.compression.summary`: when a session is compressed, and the compression itself.
"""
