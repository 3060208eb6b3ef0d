"""The dashboard: a local web page over the store of a running bot (``promptweave serve``,
``docs/dashboard.md``)."""
