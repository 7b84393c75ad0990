"""Several clients on one live ACP session over ``serve``: a second client attaches while the first is asked for a
permission, answers it, and the first (which never answers) watches the run go on; an observer sees everything and
can decide nothing. Each effect, question and answer exactly once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError

from tests.protocols.acp.conftest import TestClient as SdkClient
from tests.protocols.mcp.support import turn
from tests.serve.acp_support import acp_env, remote
from tests.serve.support import serve

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]
RESOLVED = "awaken-stdio/permissionResolved"
MARK = {"name": "mark", "arguments": {"label": "one"}}


def resolutions(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        m["params"]["update"]["_meta"][RESOLVED]
        for m in messages
        if m.get("method") == "session/update" and RESOLVED in (m["params"]["update"].get("_meta") or {})
    ]


async def test_a_second_client_decides_while_the_first_watches(tmp_path: Path) -> None:
    env = acp_env(tmp_path, [turn("Marking.", MARK), turn("Done.")])
    owner = SdkClient(env.cwd)
    owner.hold_permission = anyio.Event()  # asked, never answers: someone else will
    decider, watcher = SdkClient(env.cwd), SdkClient(env.cwd)
    async with serve(env) as served, remote(served, "ws", env.cwd, owner, name="editor") as first:
        session_id = await first.new_session()
        stops: list[str] = []
        seen: dict[str, list[dict[str, Any]]] = {}  # what each client received, by its name

        async def prompt() -> None:
            stops.append(await first.prompt(session_id, "mark it"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(prompt)
            with anyio.fail_after(20):
                await owner.permission_asked.wait()
            async with (
                remote(served, "http", env.cwd, watcher, name="dashboard") as observer,
                remote(served, "ws", env.cwd, decider, name="phone") as second,
            ):
                seen = await observer.raw("session/attach", {"sessionId": session_id, "role": "observer"})
                assert seen["role"] == "observer" and seen["connectedClients"] == [{"name": "editor", "version": "0.1",
                                                                                  "role": "controller"}]  # fmt: skip
                assert observer.texts("user_message_chunk", session_id) == ["mark it"]  # the history
                attached = await second.raw("session/attach", {"sessionId": session_id})
                assert attached["role"] == "controller"
                with anyio.fail_after(30):
                    while not stops:
                        await anyio.sleep(0.05)
                with pytest.raises(RequestError) as refused:
                    await observer.prompt(session_id, "may I?")
                assert refused.value.code == -32002
                assert observer.texts("agent_message_chunk", session_id)[-1] == "Done."  # live, after attaching
                seen.update(editor=first.wire.incoming(), phone=second.wire.incoming())
                seen.update(dashboard=observer.wire.incoming())
    assert stops == ["end_turn"] and env.marks == ["one"]  # one answer, one effect
    assert len(owner.permissions) == len(decider.permissions) == 1 and watcher.permissions == []
    asked = next(m for m in seen["editor"] if m.get("method") == "session/request_permission")
    withdrawn = {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": asked["id"]}}
    assert withdrawn in seen["editor"]  # the question it never answered, withdrawn
    for name in ("editor", "phone", "dashboard"):  # everyone told who decided
        assert resolutions(seen[name]) == [
            {"optionId": "allow_once", "resolvedBy": {"name": "phone", "version": "0.1"}}
        ]
