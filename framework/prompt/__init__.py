"""Assembling the system prompt: the render context sections receive, the section assembler,
per-bot and per-group overrides, persona packs and the sanitising rules every block goes through
(``docs/sections.md``)."""
