"""The exceptions promptweave raises, each with a message a bot author can act on."""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "DuplicateRegistrationError",
    "PlacementError",
    "PluginImportError",
    "PromptweaveError",
    "SectionRenderError",
    "TurnFileError",
]


class PromptweaveError(Exception):
    """Base class of every promptweave error."""


class ConfigError(PromptweaveError):
    """A configuration, persona-pack or overrides file is malformed.

    The message has one line per problem, each naming the file and the key path.
    """

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__("\n".join(f"{source}: {problem}" for problem in problems))


class TurnFileError(ConfigError):
    """A turn file is malformed."""


class PluginImportError(PromptweaveError):
    """A plugin module could not be imported; the message names it and its distribution."""


class DuplicateRegistrationError(PromptweaveError):
    """Two plugins registered the same id; the message names both."""


class PlacementError(PromptweaveError):
    """A section asked for an unknown anchor or a cycle; the message names the plugin."""


class SectionRenderError(PromptweaveError):
    """A section's ``render`` raised (only raised in strict mode; otherwise traced)."""
