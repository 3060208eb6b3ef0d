"""promptweave: decide whether a chat bot answers, and weave exactly what the LLM receives.

Plugin authors import everything they need from here::

    from promptweave import hookimpl, Section

A name is imported the first time it is read, so ``import framework`` costs next to nothing and a
program that uses a few names loads only the modules that define them (``docs/performance.md``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from promptweave.compression.summary import CompressionResult, CompressionStatus
    from promptweave.config import BotConfig, Config, DeliveryConfig, LoopConfig
    from promptweave.decision import (
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
        allows_persistent_memory,
    )
    from promptweave.delivery.onebot import (
        ONEBOT_V11,
        OneBotTransport,
        cq_escape,
        cq_unescape,
        onebot_action,
        onebot_segment,
        onebot_segments,
    )
    from promptweave.delivery.outgoing import (
        DeliveryPlan,
        ModelAnswer,
        OutgoingMessage,
        Segment,
        SendReceipt,
        Transport,
    )
    from promptweave.delivery.plan import PauseConfig, plan_delivery, plan_phrase
    from promptweave.delivery.reply_contract import (
        LEAK_RUN_CHARS,
        QUOTABLE_HEADERS,
        read_model_answer_default,
    )
    from promptweave.errors import (
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
    from promptweave.items import (
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
    from promptweave.loop.events import IncomingEvent, OutcomeStatus, TurnOutcome
    from promptweave.loop.live import BotLoop
    from promptweave.messages.ambient import AMBIENT_HEADER, AmbientEntry
    from promptweave.messages.images import (
        IMAGE_WITHOUT_URL,
        ImageFetchError,
        fetch_image_default,
        is_vision_url,
        merge_image_urls,
        vision_image_urls,
    )
    from promptweave.messages.prompt_message import FetchedImage, ImageLimits, PromptMessage
    from promptweave.messages.sequence import format_user_turn
    from promptweave.messages.timeline import (
        TIMELINE_HEADER,
        GroupTimeline,
        build_group_timeline,
        speaker_label,
    )
    from promptweave.messages.trimming import BudgetReport, apply_budget
    from promptweave.plugins.contributions import (
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
    from promptweave.plugins.hookspecs import hookimpl
    from promptweave.prompt.overrides import OverridesFile, load_overrides_file
    from promptweave.prompt.render_context import RenderContext
    from promptweave.prompt.rendered import RenderedSection, RenderedTurn, SectionListing
    from promptweave.providers.answers import ProviderAnswer, parse_answer
    from promptweave.providers.exchange import (
        ProviderApi,
        ProviderRequest,
        ProviderSpec,
        SubmitResult,
        ToolCall,
        ToolSpec,
        Usage,
    )
    from promptweave.providers.prefix import PrefixReport, compare_request_prefix
    from promptweave.providers.request import (
        asubmit_request,
        build_provider_request,
        submit_request,
    )
    from promptweave.providers.tools import with_tool_round, with_tools
    from promptweave.retrieval.policy import (
        KNOWLEDGE_QUESTION_WORDS,
        looks_like_knowledge_question,
        reads_as_event,
    )
    from promptweave.retrieval.query import (
        RetrievalHit,
        RetrievalQuery,
        RetrievalResult,
        SkipReason,
    )
    from promptweave.retrieval.runner import RetrievalOutcome, RetrieverTrace
    from promptweave.routing.low_engagement import PoolQuery
    from promptweave.routing.model import MODEL_ANSWER_FORMAT
    from promptweave.routing.quoting import Delivery, quote_allowed
    from promptweave.routing.signals import MessageSignals
    from promptweave.runtime import Promptweave
    from promptweave.store.retrieval import (
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
    from promptweave.store.sessions import SUMMARY_MARK, SessionSummary, SessionTurn
    from promptweave.store.sqlite import StoreUnavailableError
    from promptweave.store.stores import Stores
    from promptweave.text.persona import PersonaPack
    from promptweave.text.routing_words import is_gentle_phrase
    from promptweave.text.rules import (
        IMAGE_MARK,
        INJECTION_PATTERNS,
        RECOGNITION_QUESTION_WORDS,
        InjectionDetector,
        first_chars,
        is_recognition_question,
    )
    from promptweave.text.sanitize import (
        HEADER_BRACKET_LOOKALIKES,
        neutralize_markers,
        quote_user_text,
        sanitize_block,
        sanitize_literal,
    )
    from promptweave.text.scoring import query_terms, score_text, text_terms
    from promptweave.turn import (
        Bot,
        ChatMessage,
        GroupExpression,
        History,
        HistoryEntry,
        SpeakTrigger,
        Turn,
        TurnRetrieved,
        load_turn_file,
    )
    from promptweave.turn_context.context import (
        TurnContext,
        build_turn_context,
        collect_turn_notes,
    )
    from promptweave.turn_context.conversation_state import (
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
    from promptweave.turn_context.preflight import (
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
    from promptweave.turn_context.request_budget import TurnBudgetReport
    from promptweave.turn_context.sidecar import (
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
    "promptweave.config": (
        "BotConfig",
        "Config",
        "DeliveryConfig",
        "LoopConfig",
    ),
    "promptweave.messages.ambient": (
        "AMBIENT_HEADER",
        "AmbientEntry",
    ),
    "promptweave.messages.trimming": (
        "BudgetReport",
        "apply_budget",
    ),
    "promptweave.messages.images": (
        "IMAGE_WITHOUT_URL",
        "ImageFetchError",
        "fetch_image_default",
        "is_vision_url",
        "merge_image_urls",
        "vision_image_urls",
    ),
    "promptweave.messages.prompt_message": (
        "FetchedImage",
        "ImageLimits",
        "PromptMessage",
    ),
    "promptweave.messages.sequence": ("format_user_turn",),
    "promptweave.turn_context.conversation_state": (
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
    "promptweave.compression.summary": (
        "CompressionResult",
        "CompressionStatus",
    ),
    "promptweave.messages.timeline": (
        "TIMELINE_HEADER",
        "GroupTimeline",
        "build_group_timeline",
        "speaker_label",
    ),
    "promptweave.decision": (
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
        "allows_persistent_memory",
    ),
    "promptweave.delivery.onebot": (
        "ONEBOT_V11",
        "OneBotTransport",
        "cq_escape",
        "cq_unescape",
        "onebot_action",
        "onebot_segment",
        "onebot_segments",
    ),
    "promptweave.delivery.plan": (
        "PauseConfig",
        "plan_delivery",
        "plan_phrase",
    ),
    "promptweave.delivery.outgoing": (
        "DeliveryPlan",
        "ModelAnswer",
        "OutgoingMessage",
        "Segment",
        "SendReceipt",
        "Transport",
    ),
    "promptweave.delivery.reply_contract": (
        "LEAK_RUN_CHARS",
        "QUOTABLE_HEADERS",
        "read_model_answer_default",
    ),
    "promptweave.errors": (
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
    "promptweave.items": (
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
    "promptweave.loop.live": ("BotLoop",),
    "promptweave.loop.events": (
        "IncomingEvent",
        "OutcomeStatus",
        "TurnOutcome",
    ),
    "promptweave.plugins.hookspecs": ("hookimpl",),
    "promptweave.plugins.contributions": (
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
    "promptweave.prompt.overrides": (
        "OverridesFile",
        "load_overrides_file",
    ),
    "promptweave.text.persona": ("PersonaPack",),
    "promptweave.prompt.render_context": ("RenderContext",),
    "promptweave.prompt.rendered": (
        "RenderedSection",
        "RenderedTurn",
        "SectionListing",
    ),
    "promptweave.text.sanitize": (
        "HEADER_BRACKET_LOOKALIKES",
        "neutralize_markers",
        "quote_user_text",
        "sanitize_block",
        "sanitize_literal",
    ),
    "promptweave.text.rules": (
        "IMAGE_MARK",
        "INJECTION_PATTERNS",
        "RECOGNITION_QUESTION_WORDS",
        "InjectionDetector",
        "first_chars",
        "is_recognition_question",
    ),
    "promptweave.providers.answers": (
        "ProviderAnswer",
        "parse_answer",
    ),
    "promptweave.providers.prefix": (
        "PrefixReport",
        "compare_request_prefix",
    ),
    "promptweave.providers.exchange": (
        "ProviderApi",
        "ProviderRequest",
        "ProviderSpec",
        "SubmitResult",
        "ToolCall",
        "ToolSpec",
        "Usage",
    ),
    "promptweave.providers.request": (
        "asubmit_request",
        "build_provider_request",
        "submit_request",
    ),
    "promptweave.providers.tools": (
        "with_tool_round",
        "with_tools",
    ),
    "promptweave.retrieval.policy": (
        "KNOWLEDGE_QUESTION_WORDS",
        "looks_like_knowledge_question",
        "reads_as_event",
    ),
    "promptweave.retrieval.query": (
        "RetrievalHit",
        "RetrievalQuery",
        "RetrievalResult",
        "SkipReason",
    ),
    "promptweave.retrieval.runner": (
        "RetrievalOutcome",
        "RetrieverTrace",
    ),
    "promptweave.text.scoring": (
        "query_terms",
        "score_text",
        "text_terms",
    ),
    "promptweave.routing.low_engagement": ("PoolQuery",),
    "promptweave.routing.model": ("MODEL_ANSWER_FORMAT",),
    "promptweave.routing.quoting": (
        "Delivery",
        "quote_allowed",
    ),
    "promptweave.routing.signals": ("MessageSignals",),
    "promptweave.text.routing_words": ("is_gentle_phrase",),
    "promptweave.runtime": ("Promptweave",),
    "promptweave.store.retrieval": (
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
    "promptweave.store.sessions": (
        "SUMMARY_MARK",
        "SessionSummary",
        "SessionTurn",
    ),
    "promptweave.store.sqlite": ("StoreUnavailableError",),
    "promptweave.store.stores": ("Stores",),
    "promptweave.turn": (
        "Bot",
        "ChatMessage",
        "GroupExpression",
        "History",
        "HistoryEntry",
        "SpeakTrigger",
        "Turn",
        "TurnRetrieved",
        "load_turn_file",
    ),
    "promptweave.turn_context.context": (
        "TurnContext",
        "build_turn_context",
        "collect_turn_notes",
    ),
    "promptweave.turn_context.preflight": (
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
    "promptweave.turn_context.request_budget": ("TurnBudgetReport",),
    "promptweave.turn_context.sidecar": (
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
    "History",
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
