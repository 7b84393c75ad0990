"""The one version string: the package, ``--version``, the servers' ``serverInfo`` and the MCP client read it here."""

__version__ = "0.1.0"
