"""promptweave: decide whether a chat bot answers, and weave exactly what the LLM receives.

Plugin authors and bots import what they need from here::

    from promptweave import hookimpl, Section

These are the public names: what a plugin or a bot embedding promptweave needs, each documented in
``docs/plugin_hooks.md#public-names`` or ``docs/architecture.md#the-public-face``. Everything else
stays in the module that defines it, where the built-in plugins import it from.

A name is imported the first time it is read, so ``import promptweave`` costs next to nothing and a
program that uses a few names loads only the modules that define them (``docs/performance.md``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: Every public name and the module that defines it: the one list of the public face. It gives
#: ``__all__`` and ``dir()``, and the module to import when a name is first read.
_DEFINED_IN: dict[str, str] = {
    # The marker, and the records the ``register_*`` and ``override_section`` hooks take.
    "hookimpl": "promptweave.plugins.hookspecs",
    "Section": "promptweave.plugins.contributions",
    "Retriever": "promptweave.plugins.contributions",
    "DecisionRule": "promptweave.plugins.contributions",
    "PhrasePool": "promptweave.plugins.contributions",
    "SectionOverride": "promptweave.plugins.contributions",
    "Tool": "promptweave.plugins.contributions",
    "ToolCallContext": "promptweave.plugins.contributions",
    "Learner": "promptweave.plugins.contributions",
    "LearnerBatch": "promptweave.plugins.contributions",
    "LearnerResult": "promptweave.plugins.contributions",
    "LearnedItem": "promptweave.store.learned",
    "ModelAsker": "promptweave.plugins.contributions",
    "ModelTask": "promptweave.learning.model",
    "PoolQuery": "promptweave.routing.low_engagement",
    # What a section, a routing rule and a retriever receive and return.
    "RenderContext": "promptweave.prompt.render_context",
    "RouteContext": "promptweave.decision",
    "Decision": "promptweave.decision",
    "TurnAction": "promptweave.decision",
    "GateSkip": "promptweave.decision",
    "ScoreTerm": "promptweave.decision",
    "RetrievalQuery": "promptweave.retrieval.query",
    "RetrievalResult": "promptweave.retrieval.query",
    "RetrievalHit": "promptweave.retrieval.query",
    # The items retrievers build, which the sections of the data they feed read.
    "MemoryItem": "promptweave.items",
    "KnowledgeItem": "promptweave.items",
    "RelationshipNote": "promptweave.items",
    "PersonFact": "promptweave.items",
    "TopicSummary": "promptweave.items",
    "ExpressionPair": "promptweave.items",
    "RhythmBaseline": "promptweave.items",
    "BehaviorStrategy": "promptweave.items",
    # A turn: what a section reads of the message, the bot and the reply's shape.
    "Turn": "promptweave.turn",
    "Bot": "promptweave.turn",
    "ChatMessage": "promptweave.turn",
    "HistoryEntry": "promptweave.turn",
    "ReplyShape": "promptweave.items",
    "IMAGE_WITHOUT_URL": "promptweave.messages.images",
    # The other records hooks receive and return.
    "Config": "promptweave.config",
    "IncomingEvent": "promptweave.loop.events",
    "PromptMessage": "promptweave.messages.prompt_message",
    "WordingHint": "promptweave.messages.prompt_message",
    "ImageLimits": "promptweave.messages.prompt_message",
    "FetchedImage": "promptweave.messages.prompt_message",
    "ProviderRequest": "promptweave.providers.exchange",
    "ProviderApi": "promptweave.providers.exchange",
    "SubmitResult": "promptweave.providers.exchange",
    "SessionTurn": "promptweave.store.session_rows",
    "ModelAnswer": "promptweave.delivery.outgoing",
    "Segment": "promptweave.delivery.outgoing",
    "OutgoingMessage": "promptweave.delivery.outgoing",
    "Transport": "promptweave.delivery.outgoing",
    "SendReceipt": "promptweave.delivery.outgoing",
    "ReplyInjection": "promptweave.delivery.outgoing",
    "InjectedSource": "promptweave.delivery.outgoing",
    # Helpers for plugins: text safety, reading a provider's answer, the model's formats.
    "sanitize_block": "promptweave.text.sanitize",
    "quote_user_text": "promptweave.text.sanitize",
    "neutralize_markers": "promptweave.text.sanitize",
    "parse_answer": "promptweave.providers.answers",
    "MODEL_ANSWER_FORMAT": "promptweave.routing.model",
    "read_model_answer_default": "promptweave.delivery.reply_contract",
    # Embedding a bot: the runtime, the live loop, the stores, a turn's request by hand.
    "Promptweave": "promptweave.runtime",
    "BotLoop": "promptweave.loop.live",
    "TurnOutcome": "promptweave.loop.events",
    "Stores": "promptweave.store.stores",
    "effective_group_settings": "promptweave.routing.group_control",
    "RenderedTurn": "promptweave.prompt.rendered",
    "load_turn_file": "promptweave.turn",
    "History": "promptweave.turn",
    "build_turn_context": "promptweave.turn_context.context",
    "build_provider_request": "promptweave.providers.request",
    "submit_request": "promptweave.providers.request",
    "asubmit_request": "promptweave.providers.request",
    "ToolSpec": "promptweave.providers.exchange",
    "with_tools": "promptweave.providers.tools",
    "with_tool_round": "promptweave.providers.tools",
    # What a reply costs: the provider's usage, the price table's row, money from usage.
    "Usage": "promptweave.providers.exchange",
    "ModelPrice": "promptweave.config",
    "price_usage": "promptweave.providers.cost",
    # Errors.
    "PromptweaveError": "promptweave.errors",
    "ConfigError": "promptweave.errors",
    "TurnFileError": "promptweave.errors",
    "PluginImportError": "promptweave.errors",
    "PluginRegistrationError": "promptweave.errors",
    "PluginValidationError": "promptweave.errors",
    "DuplicateRegistrationError": "promptweave.errors",
    "PlacementError": "promptweave.errors",
    "SectionRenderError": "promptweave.errors",
    "StoreUnavailableError": "promptweave.store.sqlite",
    "ImageFetchError": "promptweave.messages.images",
}

# What type checkers and editors read for the same names; tests/project/test_public_face.py fails when
# it and the table above differ.
if TYPE_CHECKING:
    from promptweave.config import Config as Config, ModelPrice as ModelPrice
    from promptweave.decision import (
        Decision as Decision,
        GateSkip as GateSkip,
        RouteContext as RouteContext,
        ScoreTerm as ScoreTerm,
        TurnAction as TurnAction,
    )
    from promptweave.delivery.outgoing import (
        InjectedSource as InjectedSource,
        ModelAnswer as ModelAnswer,
        OutgoingMessage as OutgoingMessage,
        ReplyInjection as ReplyInjection,
        Segment as Segment,
        SendReceipt as SendReceipt,
        Transport as Transport,
    )
    from promptweave.delivery.reply_contract import (
        read_model_answer_default as read_model_answer_default,
    )
    from promptweave.errors import (
        ConfigError as ConfigError,
        DuplicateRegistrationError as DuplicateRegistrationError,
        PlacementError as PlacementError,
        PluginImportError as PluginImportError,
        PluginRegistrationError as PluginRegistrationError,
        PluginValidationError as PluginValidationError,
        PromptweaveError as PromptweaveError,
        SectionRenderError as SectionRenderError,
        TurnFileError as TurnFileError,
    )
    from promptweave.items import (
        BehaviorStrategy as BehaviorStrategy,
        ExpressionPair as ExpressionPair,
        KnowledgeItem as KnowledgeItem,
        MemoryItem as MemoryItem,
        PersonFact as PersonFact,
        RelationshipNote as RelationshipNote,
        ReplyShape as ReplyShape,
        RhythmBaseline as RhythmBaseline,
        TopicSummary as TopicSummary,
    )
    from promptweave.learning.model import ModelTask as ModelTask
    from promptweave.loop.events import IncomingEvent as IncomingEvent, TurnOutcome as TurnOutcome
    from promptweave.loop.live import BotLoop as BotLoop
    from promptweave.messages.images import (
        IMAGE_WITHOUT_URL as IMAGE_WITHOUT_URL,
        ImageFetchError as ImageFetchError,
    )
    from promptweave.messages.prompt_message import (
        FetchedImage as FetchedImage,
        ImageLimits as ImageLimits,
        PromptMessage as PromptMessage,
        WordingHint as WordingHint,
    )
    from promptweave.plugins.contributions import (
        DecisionRule as DecisionRule,
        Learner as Learner,
        LearnerBatch as LearnerBatch,
        LearnerResult as LearnerResult,
        ModelAsker as ModelAsker,
        PhrasePool as PhrasePool,
        Retriever as Retriever,
        Section as Section,
        SectionOverride as SectionOverride,
        Tool as Tool,
        ToolCallContext as ToolCallContext,
    )
    from promptweave.plugins.hookspecs import hookimpl as hookimpl
    from promptweave.prompt.render_context import RenderContext as RenderContext
    from promptweave.prompt.rendered import RenderedTurn as RenderedTurn
    from promptweave.providers.answers import parse_answer as parse_answer
    from promptweave.providers.cost import price_usage as price_usage
    from promptweave.providers.exchange import (
        ProviderApi as ProviderApi,
        ProviderRequest as ProviderRequest,
        SubmitResult as SubmitResult,
        ToolSpec as ToolSpec,
        Usage as Usage,
    )
    from promptweave.providers.request import (
        asubmit_request as asubmit_request,
        build_provider_request as build_provider_request,
        submit_request as submit_request,
    )
    from promptweave.providers.tools import (
        with_tool_round as with_tool_round,
        with_tools as with_tools,
    )
    from promptweave.retrieval.query import (
        RetrievalHit as RetrievalHit,
        RetrievalQuery as RetrievalQuery,
        RetrievalResult as RetrievalResult,
    )
    from promptweave.routing.group_control import (
        effective_group_settings as effective_group_settings,
    )
    from promptweave.routing.low_engagement import PoolQuery as PoolQuery
    from promptweave.routing.model import MODEL_ANSWER_FORMAT as MODEL_ANSWER_FORMAT
    from promptweave.runtime import Promptweave as Promptweave
    from promptweave.store.learned import LearnedItem as LearnedItem
    from promptweave.store.session_rows import SessionTurn as SessionTurn
    from promptweave.store.sqlite import StoreUnavailableError as StoreUnavailableError
    from promptweave.store.stores import Stores as Stores
    from promptweave.text.sanitize import (
        neutralize_markers as neutralize_markers,
        quote_user_text as quote_user_text,
        sanitize_block as sanitize_block,
    )
    from promptweave.turn import (
        Bot as Bot,
        ChatMessage as ChatMessage,
        History as History,
        HistoryEntry as HistoryEntry,
        Turn as Turn,
        load_turn_file as load_turn_file,
    )
    from promptweave.turn_context.context import build_turn_context as build_turn_context

__all__ = sorted(_DEFINED_IN)


def __getattr__(name: str) -> Any:
    module = _DEFINED_IN.get(name)
    if module is None:
        raise AttributeError(f"module 'promptweave' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # read once: later reads find it without this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
