"""ACP v2 (Preview), negotiated per connection when a client asks for protocol version 2; v1 stays the default.

v2 is a layer over the v1 machinery, not a second server: the same ``AcpServer`` opens sessions and runs turns
through the mailbox, and this package changes what the wire carries. ``initialize.py`` answers a v2 ``initialize``
(standard library only, it is on the early path); ``peer.py`` is the JSON-RPC peer an ACP connection runs on, which
hands the v1 machinery's outbound messages to the negotiated dialect; ``updates.py`` and ``permissions.py`` turn v1
updates and permission requests into v2 ones; ``connection.py`` serves the v2 methods and reports each session's
state (``running``, ``requires_action``, ``idle``); ``replay.py`` replays a conversation for ``session/resume``.
"""

from __future__ import annotations

__all__ = ["NOTIFICATIONS", "REQUESTS", "VERSION"]

VERSION = 2

# the v2 method surface (served by ``V2Connection``; its table is ``acp/methods.py``'s)
REQUESTS = frozenset({
    "auth/login", "auth/logout", "session/new", "session/resume", "session/list", "session/close", "session/delete",
    "session/set_config_option", "session/prompt",
})  # fmt: skip
NOTIFICATIONS = frozenset({"session/cancel"})
