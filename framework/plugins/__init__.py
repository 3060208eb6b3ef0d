"""The plugin machinery: the hook specifications (the plugin contract), the records plugins
register, the registries that collect them, and the plugin manager that loads plugins in the
documented order (``docs/plugin_loading.md``)."""
