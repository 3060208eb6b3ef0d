"""The delivery stage: read the model's answer, plan the messages, send them (``docs/delivery.md``).

- :mod:`framework.delivery.records`: what passes between the steps and through the hooks;
- :mod:`framework.delivery.reply_contract`: the answer read by the contract of section
  ``reply_shape``;
- :mod:`framework.delivery.plan`: the messages of one turn, by the decision's delivery style;
- :mod:`framework.delivery.onebot`: those messages as OneBot v11 actions.
"""

from __future__ import annotations

from framework.delivery.onebot import (
    ONEBOT_V11,
    OneBotTransport,
    cq_escape,
    cq_unescape,
    onebot_action,
    onebot_segment,
    onebot_segments,
)
from framework.delivery.plan import plan_delivery, plan_phrase
from framework.delivery.records import (
    DeliveryPlan,
    ModelAnswer,
    OutgoingMessage,
    PauseConfig,
    Segment,
    SendReceipt,
    Transport,
)
from framework.delivery.reply_contract import (
    LEAK_RUN_CHARS,
    QUOTABLE_HEADERS,
    STICKER_MODES,
    read_model_answer_default,
)

__all__ = [
    "LEAK_RUN_CHARS",
    "ONEBOT_V11",
    "QUOTABLE_HEADERS",
    "STICKER_MODES",
    "DeliveryPlan",
    "ModelAnswer",
    "OneBotTransport",
    "OutgoingMessage",
    "PauseConfig",
    "Segment",
    "SendReceipt",
    "Transport",
    "cq_escape",
    "cq_unescape",
    "onebot_action",
    "onebot_segment",
    "onebot_segments",
    "plan_delivery",
    "plan_phrase",
    "read_model_answer_default",
]
