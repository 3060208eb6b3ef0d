"""promptweave: decide whether a chat bot answers, and weave exactly what the LLM receives.

Plugin authors import everything they need from here::

    from framework import hookimpl, Section
"""

from __future__ import annotations

from framework.ambient import AMBIENT_HEADER, AmbientEntry
from framework.budget import BudgetReport, apply_budget
from framework.config import Config
from framework.context import RenderContext
from framework.decision import Decision, DeliveryStyle, RouteContext, SocialAction, TurnAction
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
    ToolContext,
    TopicSummary,
    TurnPolicy,
)
from framework.messages import PromptMessage, format_user_turn
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
from framework.runtime import Promptweave, RenderedSection, RenderedTurn, SectionListing
from framework.sanitize import quote_user_text, sanitize_block, sanitize_literal
from framework.store import SUMMARY_MARK, SessionSummary, SessionTurn, StoreUnavailableError
from framework.store.stores import Stores
from framework.summary import CompressionResult, CompressionStatus
from framework.text_rules import (
    INJECTION_PATTERNS,
    RECOGNITION_QUESTION_WORDS,
    InjectionDetector,
    is_recognition_question,
    is_short_social_turn,
)
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
    "AMBIENT_HEADER",
    "INJECTION_PATTERNS",
    "RECOGNITION_QUESTION_WORDS",
    "SUMMARY_MARK",
    "TIMELINE_HEADER",
    "AmbientEntry",
    "BehaviorStrategy",
    "Bot",
    "BudgetReport",
    "ChatMessage",
    "CompressionResult",
    "CompressionStatus",
    "Config",
    "ConfigError",
    "Decision",
    "DecisionRule",
    "DeliveryStyle",
    "DuplicateRegistrationError",
    "ExpressionPair",
    "GroupExpression",
    "GroupTimeline",
    "HistoryEntry",
    "InjectionDetector",
    "KnowledgeItem",
    "LearningType",
    "MemoryItem",
    "MemoryKind",
    "OverrideMode",
    "OverridesFile",
    "PersonFact",
    "PersonaPack",
    "PhrasePool",
    "PlacementError",
    "PluginImportError",
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
    "RouteContext",
    "RuleStage",
    "Section",
    "SectionListing",
    "SectionOverride",
    "SectionRenderError",
    "SessionSummary",
    "SessionTurn",
    "SocialAction",
    "SpeakTrigger",
    "StoreUnavailableError",
    "Stores",
    "ToolContext",
    "TopicSummary",
    "Turn",
    "TurnAction",
    "TurnFileError",
    "TurnPolicy",
    "TurnRetrieved",
    "Volatility",
    "apply_budget",
    "build_group_timeline",
    "format_user_turn",
    "hookimpl",
    "is_recognition_question",
    "is_short_social_turn",
    "load_overrides_file",
    "load_turn_file",
    "quote_user_text",
    "sanitize_block",
    "sanitize_literal",
    "speaker_label",
]
