"""A ``[tools] modules`` module whose import raises."""

raise RuntimeError("boom at import")
