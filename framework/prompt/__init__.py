"""Assembling the system prompt: the render context sections receive, the section assembler,
per-bot and per-group overrides, and the rendered turn (``docs/sections.md``). The persona packs
and the sanitising rules every block goes through are in :mod:`promptweave.text`."""
