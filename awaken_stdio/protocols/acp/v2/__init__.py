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

# the v2 method surface: method -> the ``V2Connection`` handler that serves it
REQUESTS = {
    "auth/login": "login",
    "auth/logout": "logout",
    "session/new": "new_session",
    "session/resume": "resume_session",
    "session/list": "list_sessions",
    "session/close": "close_session",
    "session/delete": "delete_session",
    "session/set_config_option": "set_config_option",
    "session/prompt": "prompt",
}
NOTIFICATIONS = {"session/cancel": "cancel"}
