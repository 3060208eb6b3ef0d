"""The turn pipeline: one object carries a turn through every stage (``docs/architecture.md``)."""
