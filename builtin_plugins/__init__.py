"""The built-in plugins of promptweave, registered exactly like third-party plugins.

They import only the public face of :mod:`framework`. ``framework.plugins.manager.DEFAULT_PLUGINS`` lists
them in load order; ``PROMPTWEAVE_DISABLE_PLUGINS`` blocks any of them by its short name.
"""
