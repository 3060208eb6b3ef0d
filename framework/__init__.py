"""promptweave: decide whether a chat bot answers, and weave exactly what the LLM receives.

Plugin authors import everything they need from here::

    from framework import hookimpl, Section

A name is imported the first time it is read, so ``import framework`` costs next to nothing and a
program that uses a few names loads only the modules that define them (``docs/performance.md``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from framework.config import BotConfig, Config, DeliveryConfig, LoopConfig
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
        prompt_cache_key,
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
    from framework.delivery.onebot import (
        ONEBOT_V11,
        OneBotTransport,
        cq_escape,
        cq_unescape,
        onebot_action,
        onebot_segment,
        onebot_segments,
    )
    from framework.delivery.plan import PauseConfig, plan_delivery, plan_phrase
    from framework.delivery.records import (
        DeliveryPlan,
        ModelAnswer,
        OutgoingMessage,
        Segment,
        SendReceipt,
        Transport,
    )
    from framework.delivery.reply_contract import (
        LEAK_RUN_CHARS,
        QUOTABLE_HEADERS,
        read_model_answer_default,
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
    from framework.loop.live import BotLoop
    from framework.loop.records import IncomingEvent, OutcomeStatus, TurnOutcome
    from framework.plugins.hookspecs import hookimpl
    from framework.plugins.records import (
        DecisionRule,
        OverrideMode,
        PhrasePool,
        Retriever,
        RuleStage,
        Section,
        SectionOverride,
        Tool,
        ToolCallContext,
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
    from framework.providers.answers import ProviderAnswer, parse_answer
    from framework.providers.prefix import PrefixReport, compare_request_prefix
    from framework.providers.records import (
        ProviderApi,
        ProviderRequest,
        ProviderSpec,
        SubmitResult,
        ToolCall,
        ToolSpec,
        Usage,
    )
    from framework.providers.request import asubmit_request, build_provider_request, submit_request
    from framework.providers.tools import with_tool_round, with_tools
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
    from framework.turn_context.context import (
        TurnContext,
        build_turn_context,
        collect_turn_notes,
    )
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

#: The module that defines each public name, imported when the name is first read.
_MODULES: dict[str, tuple[str, ...]] = {
    "framework.config": (
        "BotConfig",
        "Config",
        "DeliveryConfig",
        "LoopConfig",
    ),
    "framework.conversation.ambient": (
        "AMBIENT_HEADER",
        "AmbientEntry",
    ),
    "framework.conversation.budget": (
        "BudgetReport",
        "apply_budget",
    ),
    "framework.conversation.images": (
        "IMAGE_WITHOUT_URL",
        "FetchedImage",
        "ImageFetchError",
        "ImageLimits",
        "fetch_image_default",
        "is_vision_url",
        "merge_image_urls",
        "vision_image_urls",
    ),
    "framework.conversation.sequence": (
        "PromptMessage",
        "format_user_turn",
    ),
    "framework.conversation.state": (
        "ActiveSystemPrompt",
        "ConversationState",
        "InMemorySystemPromptStore",
        "InMemoryTurnTranscript",
        "NoteQueue",
        "SystemPromptStore",
        "TurnTranscript",
        "conversation_key",
        "prompt_cache_key",
    ),
    "framework.conversation.summary": (
        "CompressionResult",
        "CompressionStatus",
    ),
    "framework.conversation.timeline": (
        "TIMELINE_HEADER",
        "GroupTimeline",
        "build_group_timeline",
        "speaker_label",
    ),
    "framework.decision": (
        "Decision",
        "DeliveryStyle",
        "GateSkip",
        "LowEngagement",
        "MemoryPolicy",
        "NecessityScore",
        "RouteContext",
        "ScoreTerm",
        "SocialAction",
        "TurnAction",
    ),
    "framework.delivery.onebot": (
        "ONEBOT_V11",
        "OneBotTransport",
        "cq_escape",
        "cq_unescape",
        "onebot_action",
        "onebot_segment",
        "onebot_segments",
    ),
    "framework.delivery.plan": (
        "PauseConfig",
        "plan_delivery",
        "plan_phrase",
    ),
    "framework.delivery.records": (
        "DeliveryPlan",
        "ModelAnswer",
        "OutgoingMessage",
        "Segment",
        "SendReceipt",
        "Transport",
    ),
    "framework.delivery.reply_contract": (
        "LEAK_RUN_CHARS",
        "QUOTABLE_HEADERS",
        "read_model_answer_default",
    ),
    "framework.errors": (
        "ConfigError",
        "DuplicateRegistrationError",
        "PlacementError",
        "PluginImportError",
        "PluginRegistrationError",
        "PluginValidationError",
        "PromptweaveError",
        "SectionRenderError",
        "TurnFileError",
    ),
    "framework.items": (
        "BehaviorStrategy",
        "ExpressionPair",
        "KnowledgeItem",
        "LearningType",
        "MemoryItem",
        "MemoryKind",
        "PersonFact",
        "RelationshipNote",
        "ReplyShape",
        "RhythmBaseline",
        "RhythmProfile",
        "RouteHints",
        "ToolContext",
        "TopicSummary",
        "TurnPolicy",
    ),
    "framework.loop.live": ("BotLoop",),
    "framework.loop.records": (
        "IncomingEvent",
        "OutcomeStatus",
        "TurnOutcome",
    ),
    "framework.plugins.hookspecs": ("hookimpl",),
    "framework.plugins.records": (
        "DecisionRule",
        "OverrideMode",
        "PhrasePool",
        "Retriever",
        "RuleStage",
        "Section",
        "SectionOverride",
        "Tool",
        "ToolCallContext",
        "Volatility",
    ),
    "framework.prompt.overrides": (
        "OverridesFile",
        "load_overrides_file",
    ),
    "framework.prompt.persona": ("PersonaPack",),
    "framework.prompt.render_context": ("RenderContext",),
    "framework.prompt.rendered": (
        "RenderedSection",
        "RenderedTurn",
        "SectionListing",
    ),
    "framework.prompt.sanitize": (
        "HEADER_BRACKET_LOOKALIKES",
        "neutralize_markers",
        "quote_user_text",
        "sanitize_block",
        "sanitize_literal",
    ),
    "framework.prompt.text_rules": (
        "IMAGE_MARK",
        "INJECTION_PATTERNS",
        "RECOGNITION_QUESTION_WORDS",
        "InjectionDetector",
        "first_chars",
        "is_recognition_question",
    ),
    "framework.providers.answers": (
        "ProviderAnswer",
        "parse_answer",
    ),
    "framework.providers.prefix": (
        "PrefixReport",
        "compare_request_prefix",
    ),
    "framework.providers.records": (
        "ProviderApi",
        "ProviderRequest",
        "ProviderSpec",
        "SubmitResult",
        "ToolCall",
        "ToolSpec",
        "Usage",
    ),
    "framework.providers.request": (
        "asubmit_request",
        "build_provider_request",
        "submit_request",
    ),
    "framework.providers.tools": (
        "with_tool_round",
        "with_tools",
    ),
    "framework.retrieval.policy": (
        "KNOWLEDGE_QUESTION_WORDS",
        "looks_like_knowledge_question",
        "reads_as_event",
    ),
    "framework.retrieval.query": (
        "RetrievalHit",
        "RetrievalQuery",
        "RetrievalResult",
        "SkipReason",
    ),
    "framework.retrieval.runner": (
        "RetrievalOutcome",
        "RetrieverTrace",
    ),
    "framework.retrieval.scoring": (
        "query_terms",
        "score_text",
        "text_terms",
    ),
    "framework.routing.low_engagement": ("PoolQuery",),
    "framework.routing.memory": ("allows_persistent_memory",),
    "framework.routing.model": ("MODEL_ANSWER_FORMAT",),
    "framework.routing.quoting": (
        "Delivery",
        "quote_allowed",
    ),
    "framework.routing.signals": ("MessageSignals",),
    "framework.routing.text_signals": ("is_gentle_phrase",),
    "framework.runtime": ("Promptweave",),
    "framework.store.retrieval": (
        "BehaviorRecord",
        "ExpressionPairRecord",
        "KnowledgeDocument",
        "MemoryRecord",
        "PersonFactRecord",
        "RelationshipRecord",
        "RetrievalBatch",
        "RetrievalStore",
        "RhythmRecord",
        "SummaryRecord",
        "TopicSummarySource",
    ),
    "framework.store.sessions": (
        "SUMMARY_MARK",
        "SessionSummary",
        "SessionTurn",
    ),
    "framework.store.sqlite": ("StoreUnavailableError",),
    "framework.store.stores": ("Stores",),
    "framework.turn": (
        "Bot",
        "ChatMessage",
        "GroupExpression",
        "HistoryEntry",
        "SpeakTrigger",
        "Turn",
        "TurnRetrieved",
        "load_turn_file",
    ),
    "framework.turn_context.context": (
        "TurnContext",
        "build_turn_context",
        "collect_turn_notes",
    ),
    "framework.turn_context.preflight": (
        "PreflightResult",
        "compression_made_progress",
        "default_compress_messages",
        "estimate_messages_tokens_rough",
        "estimate_request_tokens",
        "is_user_originated",
        "reanchor_current_turn_user_idx",
        "run_preflight",
        "should_run_preflight_estimate",
    ),
    "framework.turn_context.request_budget": ("TurnBudgetReport",),
    "framework.turn_context.sidecar": (
        "append_notes_to_multimodal_content",
        "build_memory_context_block",
        "compose_user_api_content",
        "drop_stale_api_content",
        "extract_api_content_sidecar",
        "rewrite_content",
        "substitute_api_content",
    ),
}
_DEFINED_IN = {name: module for module, names in _MODULES.items() for name in names}

__all__ = [
    "AMBIENT_HEADER",
    "HEADER_BRACKET_LOOKALIKES",
    "IMAGE_MARK",
    "IMAGE_WITHOUT_URL",
    "INJECTION_PATTERNS",
    "KNOWLEDGE_QUESTION_WORDS",
    "LEAK_RUN_CHARS",
    "MODEL_ANSWER_FORMAT",
    "ONEBOT_V11",
    "QUOTABLE_HEADERS",
    "RECOGNITION_QUESTION_WORDS",
    "SUMMARY_MARK",
    "TIMELINE_HEADER",
    "ActiveSystemPrompt",
    "AmbientEntry",
    "BehaviorRecord",
    "BehaviorStrategy",
    "Bot",
    "BotConfig",
    "BotLoop",
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
    "DeliveryConfig",
    "DeliveryPlan",
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
    "IncomingEvent",
    "InjectionDetector",
    "KnowledgeDocument",
    "KnowledgeItem",
    "LearningType",
    "LoopConfig",
    "LowEngagement",
    "MemoryItem",
    "MemoryKind",
    "MemoryPolicy",
    "MemoryRecord",
    "MessageSignals",
    "ModelAnswer",
    "NecessityScore",
    "NoteQueue",
    "OneBotTransport",
    "OutcomeStatus",
    "OutgoingMessage",
    "OverrideMode",
    "OverridesFile",
    "PauseConfig",
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
    "ProviderAnswer",
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
    "Segment",
    "SendReceipt",
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
    "Tool",
    "ToolCall",
    "ToolCallContext",
    "ToolContext",
    "ToolSpec",
    "TopicSummary",
    "TopicSummarySource",
    "Transport",
    "Turn",
    "TurnAction",
    "TurnBudgetReport",
    "TurnContext",
    "TurnFileError",
    "TurnOutcome",
    "TurnPolicy",
    "TurnRetrieved",
    "TurnTranscript",
    "Usage",
    "Volatility",
    "allows_persistent_memory",
    "append_notes_to_multimodal_content",
    "apply_budget",
    "asubmit_request",
    "build_group_timeline",
    "build_memory_context_block",
    "build_provider_request",
    "build_turn_context",
    "collect_turn_notes",
    "compare_request_prefix",
    "compose_user_api_content",
    "compression_made_progress",
    "conversation_key",
    "cq_escape",
    "cq_unescape",
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
    "onebot_action",
    "onebot_segment",
    "onebot_segments",
    "parse_answer",
    "plan_delivery",
    "plan_phrase",
    "prompt_cache_key",
    "query_terms",
    "quote_allowed",
    "quote_user_text",
    "read_model_answer_default",
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
    "with_tool_round",
    "with_tools",
]


def __getattr__(name: str) -> Any:
    module = _DEFINED_IN.get(name)
    if module is None:
        raise AttributeError(f"module 'framework' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # read once: later reads find it without this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
