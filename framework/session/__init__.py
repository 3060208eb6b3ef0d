"""Reading the session: what a turn reads from the conversational stores, and the degradation when
it cannot (``docs/messages.md``, ``docs/design.md#degradation``).

- :mod:`promptweave.session.reader`: completing the turn from the stores; the speaker's history.
"""
