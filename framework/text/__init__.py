"""The text rules every stage shares: the persona pack, sanitising, the injection and image marks,
the word lists of routing and the terms retrieval matches (``docs/architecture.md``).

- :mod:`promptweave.text.persona`: the persona pack, the bot's voice and the fixed lines it writes;
- :mod:`promptweave.text.sanitize`: making user and plugin text safe to show the model;
- :mod:`promptweave.text.rules`: the marks and predicates of text (injection, images, questions);
- :mod:`promptweave.text.routing_words`: the word lists and text predicates of routing;
- :mod:`promptweave.text.scoring`: the terms, index form and score of retrieval's matches.
"""
