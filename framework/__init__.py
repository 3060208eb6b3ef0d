"""promptweave: decide whether a chat bot answers, and weave exactly what the LLM receives.

Plugin authors import everything they need from here::

    from framework import hookimpl, Section
"""

from __future__ import annotations

from framework.config import Config
from framework.context import RenderContext
from framework.decision import (
    Decision,
    DeliveryStyle,
    GateSkip,
    LowEngagement,
    MemoryPolicy,
    NecessityScore,
    RouteContext,
    ScoreTerm,
    SocialAction,
    TurnAction,
)
from framework.errors import (
    ConfigError,
    DuplicateRegistrationError,
    PlacementError,
    PluginImportError,
    PromptweaveError,
    SectionRenderError,
    TurnFileError,
)
from framework.hookspecs import hookimpl
from framework.items import (
    BehaviorStrategy,
    ExpressionPair,
    KnowledgeItem,
    LearningType,
    MemoryItem,
    MemoryKind,
    PersonFact,
    RelationshipNote,
    ReplyShape,
    RhythmBaseline,
    RhythmProfile,
    RouteHints,
    ToolContext,
    TopicSummary,
    TurnPolicy,
)
from framework.messages import PromptMessage
from framework.overrides import OverridesFile, load_overrides_file
from framework.persona import PersonaPack
from framework.records import (
    DecisionRule,
    OverrideMode,
    PhrasePool,
    Retriever,
    RuleStage,
    Section,
    SectionOverride,
    Volatility,
)
from framework.routing import (
    Delivery,
    MessageSignals,
    PoolQuery,
    allows_persistent_memory,
    quote_allowed,
)
from framework.routing.text_signals import is_gentle_phrase
from framework.runtime import Promptweave, RenderedSection, RenderedTurn, SectionListing
from framework.sanitize import quote_user_text, sanitize_block, sanitize_literal
from framework.timeline import TIMELINE_HEADER, GroupTimeline, build_group_timeline, speaker_label
from framework.turn import (
    Bot,
    ChatMessage,
    GroupExpression,
    HistoryEntry,
    SpeakTrigger,
    Turn,
    TurnRetrieved,
)
from framework.turnfile import load_turn_file

__all__ = [
    "TIMELINE_HEADER",
    "BehaviorStrategy",
    "Bot",
    "ChatMessage",
    "Config",
    "ConfigError",
    "Decision",
    "DecisionRule",
    "Delivery",
    "DeliveryStyle",
    "DuplicateRegistrationError",
    "ExpressionPair",
    "GateSkip",
    "GroupExpression",
    "GroupTimeline",
    "HistoryEntry",
    "KnowledgeItem",
    "LearningType",
    "LowEngagement",
    "MemoryItem",
    "MemoryKind",
    "MemoryPolicy",
    "MessageSignals",
    "NecessityScore",
    "OverrideMode",
    "OverridesFile",
    "PersonFact",
    "PersonaPack",
    "PhrasePool",
    "PlacementError",
    "PluginImportError",
    "PoolQuery",
    "PromptMessage",
    "Promptweave",
    "PromptweaveError",
    "RelationshipNote",
    "RenderContext",
    "RenderedSection",
    "RenderedTurn",
    "ReplyShape",
    "Retriever",
    "RhythmBaseline",
    "RhythmProfile",
    "RouteContext",
    "RouteHints",
    "RuleStage",
    "ScoreTerm",
    "Section",
    "SectionListing",
    "SectionOverride",
    "SectionRenderError",
    "SocialAction",
    "SpeakTrigger",
    "ToolContext",
    "TopicSummary",
    "Turn",
    "TurnAction",
    "TurnFileError",
    "TurnPolicy",
    "TurnRetrieved",
    "Volatility",
    "allows_persistent_memory",
    "build_group_timeline",
    "hookimpl",
    "is_gentle_phrase",
    "load_overrides_file",
    "load_turn_file",
    "quote_allowed",
    "quote_user_text",
    "sanitize_block",
    "sanitize_literal",
    "speaker_label",
]
