"""Optional plugins and integrations, off unless enabled by name (``plugins.contrib`` in
``promptweave.toml`` or ``Promptweave.from_config(contrib=[...])``)."""
