"""The built-in plugins of promptweave, registered exactly like third-party plugins.

They are loaded by name, exactly like third-party plugins. ``promptweave.plugins.manager.DEFAULT_PLUGINS`` lists
them in load order; ``PROMPTWEAVE_DISABLE_PLUGINS`` blocks any of them by its short name.
"""
