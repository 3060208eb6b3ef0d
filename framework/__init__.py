"""promptweave: decide whether a chat bot answers, and weave exactly what the LLM receives.

Plugin authors import everything they need from here::

    from framework import hookimpl, Section
"""

from __future__ import annotations

from framework.config import Config
from framework.context import RenderContext
from framework.conversation import (
    ActiveSystemPrompt,
    ConversationState,
    InMemorySystemPromptStore,
    InMemoryTurnTranscript,
    NoteQueue,
    SystemPromptStore,
    TurnTranscript,
    conversation_key,
)
from framework.decision import Decision, DeliveryStyle, RouteContext, SocialAction, TurnAction
from framework.errors import (
    ConfigError,
    DuplicateRegistrationError,
    PlacementError,
    PluginImportError,
    PluginValidationError,
    PromptweaveError,
    SectionRenderError,
    TurnFileError,
)
from framework.hookspecs import hookimpl
from framework.images import (
    FetchedImage,
    ImageFetchError,
    ImageLimits,
    fetch_image_default,
    merge_image_urls,
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
    ToolContext,
    TopicSummary,
    TurnPolicy,
)
from framework.messages import PromptMessage
from framework.overrides import OverridesFile, load_overrides_file
from framework.persona import PersonaPack
from framework.prefix import PrefixReport, compare_request_prefix
from framework.preflight import (
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
from framework.providers import (
    ProviderApi,
    ProviderRequest,
    ProviderSpec,
    SubmitResult,
    build_provider_request,
    submit_request,
)
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
from framework.sidecar import (
    append_notes_to_multimodal_content,
    build_memory_context_block,
    compose_user_api_content,
    drop_stale_api_content,
    extract_api_content_sidecar,
    rewrite_content,
    substitute_api_content,
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
from framework.turn_context import TurnContext, build_turn_context, collect_turn_notes
from framework.turnfile import load_turn_file

__all__ = [
    "TIMELINE_HEADER",
    "ActiveSystemPrompt",
    "BehaviorStrategy",
    "Bot",
    "ChatMessage",
    "Config",
    "ConfigError",
    "ConversationState",
    "Decision",
    "DecisionRule",
    "DeliveryStyle",
    "DuplicateRegistrationError",
    "ExpressionPair",
    "FetchedImage",
    "GroupExpression",
    "GroupTimeline",
    "HistoryEntry",
    "ImageFetchError",
    "ImageLimits",
    "InMemorySystemPromptStore",
    "InMemoryTurnTranscript",
    "KnowledgeItem",
    "LearningType",
    "MemoryItem",
    "MemoryKind",
    "NoteQueue",
    "OverrideMode",
    "OverridesFile",
    "PersonFact",
    "PersonaPack",
    "PhrasePool",
    "PlacementError",
    "PluginImportError",
    "PluginValidationError",
    "PrefixReport",
    "PreflightResult",
    "PromptMessage",
    "Promptweave",
    "PromptweaveError",
    "ProviderApi",
    "ProviderRequest",
    "ProviderSpec",
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
    "SocialAction",
    "SpeakTrigger",
    "SubmitResult",
    "SystemPromptStore",
    "ToolContext",
    "TopicSummary",
    "Turn",
    "TurnAction",
    "TurnContext",
    "TurnFileError",
    "TurnPolicy",
    "TurnRetrieved",
    "TurnTranscript",
    "Volatility",
    "append_notes_to_multimodal_content",
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
    "hookimpl",
    "is_user_originated",
    "load_overrides_file",
    "load_turn_file",
    "merge_image_urls",
    "quote_user_text",
    "reanchor_current_turn_user_idx",
    "rewrite_content",
    "run_preflight",
    "sanitize_block",
    "sanitize_literal",
    "should_run_preflight_estimate",
    "speaker_label",
    "submit_request",
    "substitute_api_content",
]
