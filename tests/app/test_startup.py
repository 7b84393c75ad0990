"""The app a stdio server opens after its first answer (``DeferredApp``): only once wanted, served before any request
sees it, and a config problem as the error of every request that waits."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.abc
import pytest
from anyio.streams.memory import MemoryObjectSendStream

from awaken_stdio.app.app import App, Settings
from awaken_stdio.app.config_file import read_config_file
from awaken_stdio.app.deferred import DeferredApp
from awaken_stdio.app.startup import Startup
from awaken_stdio.contract.errors import ConfigError

pytestmark = pytest.mark.anyio


class Failed(Exception):
    pass


def startup(tmp_path: Path, extra: str = "") -> Startup:
    (tmp_path / "s.json").write_text('{"turns": [{"text": "hi"}]}')
    config = tmp_path / "config.toml"
    config.write_text(f'[models.m]\nprovider = "scripted"\nscript = "s.json"\n[agents.a]\nmodel = "m"\n{extra}')
    return Startup(file=read_config_file(config), store_url=f"sqlite:///{tmp_path}/awaken.db", cwd=str(tmp_path))


class Server:
    """What a server hands the gate: its settings, its failure, its config-error hook and what it serves."""

    def __init__(self, start: Startup) -> None:
        self.start = start
        self.calls: list[str] = []
        self.config_errors: list[ConfigError] = []
        self.gate = DeferredApp(
            self.settings, failure=Failed, on_config_error=self.config_errors.append, serving=self.serving
        )

    def settings(self) -> Settings:
        self.calls.append("settings")
        return self.start.settings()

    @asynccontextmanager
    async def serving(self, app: App, settings: Settings) -> AsyncGenerator[None]:
        assert self.gate.app is None  # nobody sees the app before the server has set up around it
        self.calls.append("serving")
        await anyio.sleep(0.01)
        try:
            yield
        finally:
            self.calls.append("served")


async def test_the_app_opens_once_wanted_and_is_served_before_a_request_sees_it(tmp_path: Path) -> None:
    server = Server(startup(tmp_path))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.gate.run)
        await anyio.sleep(0.05)
        assert server.calls == [] and not server.gate.is_wanted  # not before the first answer
        apps = []

        async def request() -> None:
            apps.append(await server.gate.ready())

        async with anyio.create_task_group() as requests:
            for _ in range(3):
                requests.start_soon(request)
        assert server.calls == ["settings", "serving"]  # once, for all three
        assert apps[0] is apps[1] is apps[2] is server.gate.app
        assert apps[0].runtime.default_agent_id() == "a"
        server.gate.close()
    assert server.calls == ["settings", "serving", "served"] and server.gate.app is None
    with pytest.raises(Failed) as closed:
        await server.gate.ready()
    assert closed.value.args == (None,)  # closed: no reason to give


async def test_a_config_that_fails_validation_is_the_error_of_every_waiting_request(tmp_path: Path) -> None:
    server = Server(startup(tmp_path, "max_rounds = 0\n"))
    errors: list[str] = []

    async def request() -> None:
        with pytest.raises(Failed) as failed:
            await server.gate.ready()
        errors.append(failed.value.args[0])

    async with anyio.create_task_group() as tg:
        for _ in range(2):
            tg.start_soon(request)
        await server.gate.run()  # returns: nothing to keep open
    assert len(errors) == 2 and "agents.a.max_rounds" in errors[0] and errors[0] == errors[1]
    assert [str(e) for e in server.config_errors] == [errors[0]]  # told once (the server exits 2)
    assert server.calls == ["settings"]


async def test_closed_before_it_was_wanted_it_never_opens(tmp_path: Path) -> None:
    server = Server(startup(tmp_path))
    server.gate.close()
    with anyio.fail_after(5):
        await server.gate.run()
    assert server.calls == ["settings"]  # the config is still checked (a bad one exits 2), but nothing opens


async def test_the_first_write_of_an_announcing_writer_wants_the_app(tmp_path: Path) -> None:
    server = Server(startup(tmp_path))
    send, receive = anyio.create_memory_object_stream[bytes](4)
    wire = server.gate.announcing(_ByteWriter(send))
    assert not server.gate.is_wanted
    await wire.send(b'{"jsonrpc": "2.0", "id": 1, "result": {}}\n')
    assert server.gate.is_wanted and receive.receive_nowait().startswith(b'{"jsonrpc"')
    send.close()
    receive.close()


class _ByteWriter(anyio.abc.ByteSendStream):
    def __init__(self, send: MemoryObjectSendStream[bytes]) -> None:
        self._send = send

    async def send(self, item: bytes) -> None:
        await self._send.send(item)

    async def aclose(self) -> None:
        self._send.close()
