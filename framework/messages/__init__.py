"""Building the messages of a turn: the group timeline, the ambient excerpt, the message sequence
and its trimming to the character budget, images, and what assembly keeps of each message from one
turn to the next (``docs/messages.md``).

- :mod:`promptweave.messages.builder`: one turn's message side, sequence, budget and snapshot;
- :mod:`promptweave.messages.sequence`: the message sequence and its records;
- :mod:`promptweave.messages.ambient`: the ambient excerpt and the injection snapshot;
- :mod:`promptweave.messages.timeline`: the group timeline;
- :mod:`promptweave.messages.images`: which images go where, and fetching them;
- :mod:`promptweave.messages.trimming`: fitting the messages into the character budget;
- :mod:`promptweave.messages.message_cache`: each message's finished forms, kept across turns.
"""
