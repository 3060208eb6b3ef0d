"""The delivery stage: read the model's answer, plan the messages, send them (``docs/delivery.md``).

- :mod:`framework.delivery.records`: what passes between the steps and through the hooks;
- :mod:`framework.delivery.reply_contract`: the answer read by the contract of section
  ``reply_shape``;
- :mod:`framework.delivery.plan`: the messages of one turn, by the decision's delivery style, and
  the pauses between them;
- :mod:`framework.delivery.onebot`: those messages as OneBot v11 actions.
"""
