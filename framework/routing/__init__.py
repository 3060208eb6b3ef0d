"""Turn routing: gates, reply necessity, decision rules, quoting and the low-engagement exit.

``docs/design.md#the-routing-flow`` and ``docs/routing.md``. The rules themselves are plugins
(``builtin_plugins/routing_rules.py``, ``builtin_plugins/phrase_pools.py``); this package runs
them, reads the message's signals, and resolves the memory policy, turn policy and reply shape.
The word lists of routing are in :mod:`promptweave.text.routing_words`; the batch of route cases
that ``promptweave route`` decides is in :mod:`promptweave.cli.route_batch`.
"""
