"""Storage for conversational and retrieval state.

Every store is an interface with an embedded SQLite implementation (the default, nothing to
install) and an in-memory one. Callers only see the interfaces, so another engine can be added
without touching them. No state lives in module globals.
"""
