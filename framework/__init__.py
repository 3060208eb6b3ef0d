"""promptweave: decide whether a chat bot answers, and weave exactly what the LLM receives.

Plugin authors import everything they need from here::

    from framework import hookimpl, Section
"""

from __future__ import annotations

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
from framework.retrieval import (
    KNOWLEDGE_QUESTION_WORDS,
    RetrievalHit,
    RetrievalOutcome,
    RetrievalQuery,
    RetrievalResult,
    RetrieverTrace,
    SkipReason,
    allows_persistent_memory,
    looks_like_knowledge_question,
    query_terms,
    reads_as_event,
    score_text,
    text_terms,
)
from framework.runtime import Promptweave, RenderedSection, RenderedTurn, SectionListing
from framework.sanitize import quote_user_text, sanitize_block, sanitize_literal
from framework.store import (
    BehaviorRecord,
    ExpressionPairRecord,
    KnowledgeDocument,
    MemoryRecord,
    PersonFactRecord,
    RelationshipRecord,
    RetrievalBatch,
    RetrievalStore,
    RhythmRecord,
    SummaryRecord,
    TopicSummarySource,
)
from framework.store.stores import Stores
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
    "KNOWLEDGE_QUESTION_WORDS",
    "TIMELINE_HEADER",
    "BehaviorRecord",
    "BehaviorStrategy",
    "Bot",
    "ChatMessage",
    "Config",
    "ConfigError",
    "Decision",
    "DecisionRule",
    "DeliveryStyle",
    "DuplicateRegistrationError",
    "ExpressionPair",
    "ExpressionPairRecord",
    "GroupExpression",
    "GroupTimeline",
    "HistoryEntry",
    "KnowledgeDocument",
    "KnowledgeItem",
    "LearningType",
    "MemoryItem",
    "MemoryKind",
    "MemoryRecord",
    "OverrideMode",
    "OverridesFile",
    "PersonFact",
    "PersonFactRecord",
    "PersonaPack",
    "PhrasePool",
    "PlacementError",
    "PluginImportError",
    "PromptMessage",
    "Promptweave",
    "PromptweaveError",
    "RelationshipNote",
    "RelationshipRecord",
    "RenderContext",
    "RenderedSection",
    "RenderedTurn",
    "ReplyShape",
    "RetrievalBatch",
    "RetrievalHit",
    "RetrievalOutcome",
    "RetrievalQuery",
    "RetrievalResult",
    "RetrievalStore",
    "Retriever",
    "RetrieverTrace",
    "RhythmBaseline",
    "RhythmRecord",
    "RouteContext",
    "RuleStage",
    "Section",
    "SectionListing",
    "SectionOverride",
    "SectionRenderError",
    "SkipReason",
    "SocialAction",
    "SpeakTrigger",
    "Stores",
    "SummaryRecord",
    "ToolContext",
    "TopicSummary",
    "TopicSummarySource",
    "Turn",
    "TurnAction",
    "TurnFileError",
    "TurnPolicy",
    "TurnRetrieved",
    "Volatility",
    "allows_persistent_memory",
    "build_group_timeline",
    "hookimpl",
    "load_overrides_file",
    "load_turn_file",
    "looks_like_knowledge_question",
    "query_terms",
    "quote_user_text",
    "reads_as_event",
    "sanitize_block",
    "sanitize_literal",
    "score_text",
    "speaker_label",
    "text_terms",
]
