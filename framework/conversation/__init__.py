"""The conversation around a turn: reading the session from the stores, the group timeline, the
ambient excerpt, the message sequence and its budget, images, long-session compression and the
per-conversation state of the turn-context layer (``docs/messages.md``)."""
