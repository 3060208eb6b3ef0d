"""promptweave: decide whether a chat bot answers, and weave exactly what the LLM receives.

Plugin authors import everything they need from here::

    from framework import hookimpl, Section
"""

from __future__ import annotations

from framework.config import Config
from framework.conversation.ambient import AMBIENT_HEADER, AmbientEntry
from framework.conversation.budget import BudgetReport, apply_budget
from framework.conversation.images import (
    IMAGE_WITHOUT_URL,
    FetchedImage,
    ImageFetchError,
    ImageLimits,
    fetch_image_default,
    is_vision_url,
    merge_image_urls,
    vision_image_urls,
)
from framework.conversation.sequence import PromptMessage, format_user_turn
from framework.conversation.state import (
    ActiveSystemPrompt,
    ConversationState,
    InMemorySystemPromptStore,
    InMemoryTurnTranscript,
    NoteQueue,
    SystemPromptStore,
    TurnTranscript,
    conversation_key,
)
from framework.conversation.summary import CompressionResult, CompressionStatus
from framework.conversation.timeline import (
    TIMELINE_HEADER,
    GroupTimeline,
    build_group_timeline,
    speaker_label,
)
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
    PluginRegistrationError,
    PluginValidationError,
    PromptweaveError,
    SectionRenderError,
    TurnFileError,
)
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
from framework.plugins.hookspecs import hookimpl
from framework.plugins.records import (
    DecisionRule,
    OverrideMode,
    PhrasePool,
    Retriever,
    RuleStage,
    Section,
    SectionOverride,
    Volatility,
)
from framework.prompt.overrides import OverridesFile, load_overrides_file
from framework.prompt.persona import PersonaPack
from framework.prompt.render_context import RenderContext
from framework.prompt.rendered import RenderedSection, RenderedTurn, SectionListing
from framework.prompt.sanitize import (
    HEADER_BRACKET_LOOKALIKES,
    neutralize_markers,
    quote_user_text,
    sanitize_block,
    sanitize_literal,
)
from framework.prompt.text_rules import (
    IMAGE_MARK,
    INJECTION_PATTERNS,
    RECOGNITION_QUESTION_WORDS,
    InjectionDetector,
    first_chars,
    is_recognition_question,
)
from framework.providers.prefix import PrefixReport, compare_request_prefix
from framework.providers.records import ProviderApi, ProviderRequest, ProviderSpec, SubmitResult
from framework.providers.request import build_provider_request, submit_request
from framework.retrieval.policy import (
    KNOWLEDGE_QUESTION_WORDS,
    looks_like_knowledge_question,
    reads_as_event,
)
from framework.retrieval.query import RetrievalHit, RetrievalQuery, RetrievalResult, SkipReason
from framework.retrieval.runner import RetrievalOutcome, RetrieverTrace
from framework.retrieval.scoring import query_terms, score_text, text_terms
from framework.routing.low_engagement import PoolQuery
from framework.routing.memory import allows_persistent_memory
from framework.routing.model import MODEL_ANSWER_FORMAT
from framework.routing.quoting import Delivery, quote_allowed
from framework.routing.signals import MessageSignals
from framework.routing.text_signals import is_gentle_phrase
from framework.runtime import Promptweave
from framework.store.retrieval import (
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
from framework.store.sessions import SUMMARY_MARK, SessionSummary, SessionTurn
from framework.store.sqlite import StoreUnavailableError
from framework.store.stores import Stores
from framework.turn import (
    Bot,
    ChatMessage,
    GroupExpression,
    HistoryEntry,
    SpeakTrigger,
    Turn,
    TurnRetrieved,
    load_turn_file,
)
from framework.turn_context.context import TurnContext, build_turn_context, collect_turn_notes
from framework.turn_context.preflight import (
    PreflightResult,
    compression_made_progress,
    default_compress_messages,
    estimate_messages_tokens_rough,
    estimate_request_tokens,
    is_user_originated,
    reanchor_current_turn_user_idx,
    run_preflight,
    should_run_preflight_estimate,
)
from framework.turn_context.request_budget import TurnBudgetReport
from framework.turn_context.sidecar import (
    append_notes_to_multimodal_content,
    build_memory_context_block,
    compose_user_api_content,
    drop_stale_api_content,
    extract_api_content_sidecar,
    rewrite_content,
    substitute_api_content,
)

__all__ = [
    "AMBIENT_HEADER",
    "HEADER_BRACKET_LOOKALIKES",
    "IMAGE_MARK",
    "IMAGE_WITHOUT_URL",
    "INJECTION_PATTERNS",
    "KNOWLEDGE_QUESTION_WORDS",
    "MODEL_ANSWER_FORMAT",
    "RECOGNITION_QUESTION_WORDS",
    "SUMMARY_MARK",
    "TIMELINE_HEADER",
    "ActiveSystemPrompt",
    "AmbientEntry",
    "BehaviorRecord",
    "BehaviorStrategy",
    "Bot",
    "BudgetReport",
    "ChatMessage",
    "CompressionResult",
    "CompressionStatus",
    "Config",
    "ConfigError",
    "ConversationState",
    "Decision",
    "DecisionRule",
    "Delivery",
    "DeliveryStyle",
    "DuplicateRegistrationError",
    "ExpressionPair",
    "ExpressionPairRecord",
    "FetchedImage",
    "GateSkip",
    "GroupExpression",
    "GroupTimeline",
    "HistoryEntry",
    "ImageFetchError",
    "ImageLimits",
    "InMemorySystemPromptStore",
    "InMemoryTurnTranscript",
    "InjectionDetector",
    "KnowledgeDocument",
    "KnowledgeItem",
    "LearningType",
    "LowEngagement",
    "MemoryItem",
    "MemoryKind",
    "MemoryPolicy",
    "MemoryRecord",
    "MessageSignals",
    "NecessityScore",
    "NoteQueue",
    "OverrideMode",
    "OverridesFile",
    "PersonFact",
    "PersonFactRecord",
    "PersonaPack",
    "PhrasePool",
    "PlacementError",
    "PluginImportError",
    "PluginRegistrationError",
    "PluginValidationError",
    "PoolQuery",
    "PrefixReport",
    "PreflightResult",
    "PromptMessage",
    "Promptweave",
    "PromptweaveError",
    "ProviderApi",
    "ProviderRequest",
    "ProviderSpec",
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
    "RhythmProfile",
    "RhythmRecord",
    "RouteContext",
    "RouteHints",
    "RuleStage",
    "ScoreTerm",
    "Section",
    "SectionListing",
    "SectionOverride",
    "SectionRenderError",
    "SessionSummary",
    "SessionTurn",
    "SkipReason",
    "SocialAction",
    "SpeakTrigger",
    "StoreUnavailableError",
    "Stores",
    "SubmitResult",
    "SummaryRecord",
    "SystemPromptStore",
    "ToolContext",
    "TopicSummary",
    "TopicSummarySource",
    "Turn",
    "TurnAction",
    "TurnBudgetReport",
    "TurnContext",
    "TurnFileError",
    "TurnPolicy",
    "TurnRetrieved",
    "TurnTranscript",
    "Volatility",
    "allows_persistent_memory",
    "append_notes_to_multimodal_content",
    "apply_budget",
    "build_group_timeline",
    "build_memory_context_block",
    "build_provider_request",
    "build_turn_context",
    "collect_turn_notes",
    "compare_request_prefix",
    "compose_user_api_content",
    "compression_made_progress",
    "conversation_key",
    "default_compress_messages",
    "drop_stale_api_content",
    "estimate_messages_tokens_rough",
    "estimate_request_tokens",
    "extract_api_content_sidecar",
    "fetch_image_default",
    "first_chars",
    "format_user_turn",
    "hookimpl",
    "is_gentle_phrase",
    "is_recognition_question",
    "is_user_originated",
    "is_vision_url",
    "load_overrides_file",
    "load_turn_file",
    "looks_like_knowledge_question",
    "merge_image_urls",
    "neutralize_markers",
    "query_terms",
    "quote_allowed",
    "quote_user_text",
    "reads_as_event",
    "reanchor_current_turn_user_idx",
    "rewrite_content",
    "run_preflight",
    "sanitize_block",
    "sanitize_literal",
    "score_text",
    "should_run_preflight_estimate",
    "speaker_label",
    "submit_request",
    "substitute_api_content",
    "text_terms",
    "vision_image_urls",
]
