"""Turn routing: gates, reply necessity, decision rules, quoting and the low-engagement exit.

Seed 004, 入口路由 (``docs/routing.md``). The rules themselves are plugins
(``builtin_plugins/routing_rules.py``, ``builtin_plugins/phrase_pools.py``); this package runs
them, reads the message's signals, and resolves the memory policy, turn policy and reply shape.
"""

from __future__ import annotations

from framework.routing import text_signals
from framework.routing.low_engagement import PoolQuery, emit_probability, pick_phrase
from framework.routing.memory import allows_persistent_memory, memory_policy_for
from framework.routing.model import (
    MODEL_ANSWER_FORMAT,
    ModelAnswer,
    ModelAnswerError,
    check_model_answer,
    parse_model_answer,
)
from framework.routing.quoting import (
    Delivery,
    quote_allowed,
    resolve_delivery,
)
from framework.routing.router import DEFAULT_DECISION, Router, recent_bot_replies
from framework.routing.shape import (
    infer_scene,
    resolve_reply_shape,
    resolve_reply_target,
    resolve_turn_policy,
    rhythm_for,
)
from framework.routing.signals import MessageSignals, mention_ids

__all__ = [
    "DEFAULT_DECISION",
    "MODEL_ANSWER_FORMAT",
    "Delivery",
    "MessageSignals",
    "ModelAnswer",
    "ModelAnswerError",
    "PoolQuery",
    "Router",
    "allows_persistent_memory",
    "check_model_answer",
    "emit_probability",
    "infer_scene",
    "memory_policy_for",
    "mention_ids",
    "parse_model_answer",
    "pick_phrase",
    "quote_allowed",
    "recent_bot_replies",
    "resolve_delivery",
    "resolve_reply_shape",
    "resolve_reply_target",
    "resolve_turn_policy",
    "rhythm_for",
    "text_signals",
]
