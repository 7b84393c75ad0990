"""The application layer: everything the protocol servers and the CLI share, between them and the runtime.

``config_file`` (TOML, environment, store URL) and ``startup`` (the first answer from the raw config) are light;
``config`` (pydantic models and assembly), ``dispatch`` (the mailbox dispatcher that makes every run and decision
exactly-once) and ``app`` (the :class:`~awaken_stdio.app.app.App` facade and ``open_app``) are loaded only after a
server's first answer. This ``__init__`` imports nothing, so importing ``awaken_stdio.app.startup`` stays cheap.
"""
