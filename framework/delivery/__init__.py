"""Delivering and recording: read the model's answer, plan the messages, send them, and record
what was delivered (``docs/delivery.md``, ``docs/store.md``).

- :mod:`promptweave.delivery.outgoing`: what passes between the steps and through the hooks;
- :mod:`promptweave.delivery.reply_contract`: the answer read by the contract of section
  ``reply_shape``;
- :mod:`promptweave.delivery.plan`: the messages of one turn, by the decision's delivery style, and
  the pauses between them;
- :mod:`promptweave.delivery.onebot`: those messages as OneBot v11 actions;
- :mod:`promptweave.delivery.recorder` (the part the runtime holds) and
  :mod:`promptweave.delivery.store_writes` (what reaches the stores): what the bot delivered
  enters the group log, the user's session, the bot-reply context and the routing state; long
  sessions are compressed in the background.
"""
