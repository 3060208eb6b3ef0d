"""The exceptions promptweave raises, each with a message a bot author can act on."""

from __future__ import annotations

import pluggy

__all__ = [
    "ConfigError",
    "DuplicateRegistrationError",
    "PlacementError",
    "PluginImportError",
    "PluginRegistrationError",
    "PluginValidationError",
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
    """A plugin could not be loaded (import error, unknown contrib name, or a name clash); the
    message names it and its distribution."""


class PluginRegistrationError(PromptweaveError, TypeError):
    """A contribution hook (``register_*``) failed at start-up: it raised, or registered
    something other than the record it contributes; the message names the plugin and the hook.
    Also a ``TypeError``, which is what a wrong record always raised."""


class PluginValidationError(PromptweaveError, pluggy.PluginValidationError):
    """A plugin implements a hook that does not exist or with the wrong arguments; the message
    names it and its distribution."""


class DuplicateRegistrationError(PromptweaveError):
    """Two plugins registered the same id; the message names both."""


class PlacementError(PromptweaveError):
    """A section asked for an unknown anchor or a cycle; the message names the plugin."""


class SectionRenderError(PromptweaveError):
    """A section's ``render`` raised (only raised in strict mode; otherwise traced)."""
