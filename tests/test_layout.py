"""The layout of ``framework``: stage packages, one-way imports, a stable public face.

``docs/architecture.md`` describes the rules these tests hold the tree to.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import grimp

import promptweave

FRAMEWORK = Path(promptweave.__file__).parent

#: What ``framework`` exported when the tree was reorganised into stage packages: a plugin or a
#: bot written against these names keeps working. New names may be added; none may go.
PUBLIC_NAMES = frozenset(
    {
        "AMBIENT_HEADER",
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
        "History",
        "HistoryEntry",
        "IMAGE_MARK",
        "IMAGE_WITHOUT_URL",
        "INJECTION_PATTERNS",
        "ImageFetchError",
        "ImageLimits",
        "InMemorySystemPromptStore",
        "InMemoryTurnTranscript",
        "InjectionDetector",
        "KNOWLEDGE_QUESTION_WORDS",
        "KnowledgeDocument",
        "KnowledgeItem",
        "LearningType",
        "LowEngagement",
        "MODEL_ANSWER_FORMAT",
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
        "RECOGNITION_QUESTION_WORDS",
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
        "SUMMARY_MARK",
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
        "TIMELINE_HEADER",
        "ToolCall",
        "ToolContext",
        "ToolSpec",
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
        "parse_answer",
        "prompt_cache_key",
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
        "with_tool_round",
        "with_tools",
    }
)

#: The modules the plugin contract may import for its annotations: records only, never a stage
#: that runs (``docs/architecture.md``, "Dependency rules").
HOOKSPEC_IMPORTS_ALLOWED = re.compile(
    r"promptweave\.(config|decision|items|turn|plugins\.records|prompt\.render_context|"
    r"conversation\.(images|sequence)|providers\.records|store\.sessions|delivery\.records|loop\.records)$"
)


#: The plugin packages inside ``promptweave``: plugins, not the core the layout rules are about.
PLUGIN_PACKAGES = ("promptweave.builtin_plugins", "promptweave.contrib")


def _graph() -> grimp.ImportGraph:
    # grimp reads every import statement, those under ``if TYPE_CHECKING:`` included.
    return grimp.build_graph("promptweave", cache_dir=None)


def test_no_import_circle_among_framework_modules() -> None:
    graph = _graph()
    circles = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back:
                circles.append(" -> ".join((importer, *back)))
    assert circles == []


def test_no_framework_module_imports_the_facade() -> None:
    graph = _graph()
    importers = graph.find_modules_that_directly_import("promptweave")
    assert {m for m in importers if not m.startswith(PLUGIN_PACKAGES)} == set()


def test_hookspecs_depend_on_records_alone() -> None:
    imported = _graph().find_modules_directly_imported_by("promptweave.plugins.hookspecs")
    assert sorted(m for m in imported if not HOOKSPEC_IMPORTS_ALLOWED.match(m)) == []


def test_public_names_stay_exported() -> None:
    assert sorted(PUBLIC_NAMES - set(promptweave.__all__)) == []
    assert [name for name in promptweave.__all__ if not hasattr(promptweave, name)] == []


def test_top_of_framework_keeps_to_the_shared_modules() -> None:
    top = sorted(p.stem for p in FRAMEWORK.glob("*.py") if p.stem != "__init__")
    assert len(top) <= 12, top


def test_package_inits_hold_a_docstring_only() -> None:
    for init in FRAMEWORK.glob("*/__init__.py"):
        body = ast.parse(init.read_text(encoding="utf-8")).body
        assert len(body) == 1 and isinstance(body[0], ast.Expr), init


def test_no_two_module_names_differ_only_by_a_prefix_or_suffix() -> None:
    stems = {p.stem for p in FRAMEWORK.rglob("*.py") if not p.stem.startswith("__")}
    confusing = sorted(
        (stem, other)
        for stem in stems
        for other in (f"turn_{stem}", f"{stem}_io", f"{stem}file")
        if other in stems
    )
    assert confusing == []
