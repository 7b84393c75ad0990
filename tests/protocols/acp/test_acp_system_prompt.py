"""The client-provided system prompt (ACP ``systemPrompt {mode, content}``, unstable) end to end: the real agent
process driven with raw frames checked against the pinned unstable schema.

What the model was sent is read from the scripted model's usage: it estimates a request's input at four characters
a token of its system prompt and its text (``providers/scripted.py``), and the agent reports each inference's usage
(``usage_update``), so a system prompt of a known length shows in the count. ``append`` puts the client's text after
the agent's own ``system_prompt``, ``override`` replaces it; the choice is kept with the session in the store, so a
reload in a new process, a fork, and a run resumed by ``awaken-stdio runs approve`` with no editor at all still send
it. What cannot be applied is -32602 and creates nothing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

import anyio
import pytest
from acp import RequestError, text_block

from awaken_stdio.stores import open_store

from .conftest import ROOT, UNSTABLE, Agent, Harness
from .test_acp_approvals import waiting_run

pytestmark = pytest.mark.anyio

OWN = "You are the configured agent."
FIRST, SECOND = "Speak like a pirate. " * 40, "Be brief. " * 30
PIRATE = {"mode": "append", "content": [{"type": "text", "text": FIRST}, {"type": "text", "text": SECOND}]}
ONLY = {"mode": "override", "content": [{"type": "text", "text": "z" * 4000}]}
ANSWER = "Arr."


def validate_unstable(definition: str, value: Any) -> None:
    import jsonschema

    jsonschema.Draft202012Validator({"$defs": UNSTABLE["$defs"], "$ref": f"#/$defs/{definition}"}).validate(value)


def configure(harness: Harness, turns: list[dict[str, Any]] | None = None) -> None:
    script = {"turns": turns or [{"text": ANSWER}], "after_last": "repeat_last"}
    (harness.dir / "script.json").write_text(json.dumps(script))
    harness.config = harness.dir / "config.toml"
    harness.config.write_text(
        'default_agent = "coder"\n[models.main]\nprovider = "scripted"\nscript = "script.json"\n'
        f'[agents.coder]\nmodel = "main"\nsystem_prompt = "{OWN}"\n'
    )


def used(system: str, texts: list[str]) -> int:
    """The scripted model's usage of one answer ``ANSWER`` to a conversation of ``texts`` under ``system``."""
    return (len(system) + sum(map(len, texts)) + 3) // 4 + (len(ANSWER) + 3) // 4


def usages(agent: Agent, sid: str) -> list[int]:
    return [u["used"] for u in agent.updates(sid) if u["sessionUpdate"] == "usage_update"]


async def new_session(agent: Agent, prompt: dict[str, Any] | None) -> str:
    params: dict[str, Any] = {"cwd": str(agent.workspace), "mcpServers": []}
    if prompt is not None:
        params["systemPrompt"] = prompt
    validate_unstable("NewSessionRequest", params)
    return (await agent.raw("session/new", params))["sessionId"]


async def test_append_and_override_reach_the_model_and_survive_a_restart_and_a_fork(harness: Harness) -> None:
    configure(harness)
    appended_system = f"{OWN}\n\n{FIRST}\n\n{SECOND}"
    async with harness.spawn() as agent:
        init = agent.wire.incoming()[0]["result"]
        assert init["agentCapabilities"]["sessionCapabilities"]["systemPrompt"] == {"mode": {"override": {}}}
        validate_unstable("InitializeResponse", init)
        plain = await new_session(agent, None)
        appended = await new_session(agent, PIRATE)
        replaced = await new_session(agent, ONLY)
        for sid in (plain, appended, replaced):
            assert await agent.prompt(sid, "hello") == "end_turn"
        assert usages(agent, plain) == [used(OWN, ["hello"])]
        assert usages(agent, appended) == [used(appended_system, ["hello"])]
        assert usages(agent, replaced) == [used("z" * 4000, ["hello"])]

    async with harness.spawn(unstable=True) as agent:  # a new process: the prompt comes back from the store
        params = {"sessionId": appended, "cwd": str(agent.workspace), "mcpServers": []}
        validate_unstable("LoadSessionRequest", params)
        await agent.raw("session/load", params)
        assert await agent.prompt(appended, "again") == "end_turn"
        assert usages(agent, appended) == [used(appended_system, ["hello", ANSWER, "again"])]
        fork_params = {"sessionId": appended, "cwd": str(agent.workspace), "mcpServers": []}
        validate_unstable("ForkSessionRequest", fork_params)
        forked = (await agent.raw("session/fork", fork_params))["sessionId"]
        assert await agent.prompt(forked, "fork") == "end_turn"  # inherited, with the conversation it copied
        assert usages(agent, forked) == [used(appended_system, ["hello", ANSWER, "again", ANSWER, "fork"])]
        # a resume that sends one replaces it, and keeps it from then on
        resume = {"sessionId": replaced, "cwd": str(agent.workspace), "mcpServers": [], "systemPrompt": PIRATE}
        validate_unstable("ResumeSessionRequest", resume)
        await agent.raw("session/resume", resume)
        assert await agent.prompt(replaced, "now") == "end_turn"
        assert usages(agent, replaced) == [used(appended_system, ["hello", ANSWER, "now"])]


@pytest.mark.parametrize(
    ("prompt", "says"),
    [
        ({"mode": "replace", "content": [{"type": "text", "text": "x"}]}, "mode"),
        ({"mode": "append", "content": []}, "non-empty"),
        ({"mode": "append", "content": [{"type": "image", "data": "AA==", "mimeType": "image/png"}]}, "text only"),
        ({"content": [{"type": "text", "text": "x"}]}, "mode"),
        ("just a string", "object"),
    ],
)
async def test_a_system_prompt_that_cannot_be_applied_is_refused_and_creates_nothing(
    harness: Harness, prompt: Any, says: str
) -> None:
    configure(harness)
    async with harness.spawn() as agent:
        with pytest.raises(RequestError) as raised:
            await agent.raw("session/new", {"cwd": str(agent.workspace), "mcpServers": [], "systemPrompt": prompt})
        assert raised.value.code == -32602 and says in str(raised.value)
        listed = await agent.raw("session/list", {})
        assert listed["sessions"] == []


async def test_a_run_resumed_from_the_command_line_keeps_the_sessions_system_prompt(harness: Harness) -> None:
    """The run waits for an approval; the editor dies; ``runs approve`` resumes it in its own process, rebuilt
    from the session record, and its model call still sends the client's 4,000-character prompt (1,000 tokens)."""
    write = {"name": "write_file", "arguments": {"path": "a.txt", "content": "written"}}
    configure(harness, [{"tool_calls": [write]}, {"text": "Done."}])
    async with harness.spawn() as agent:
        sid = await new_session(agent, ONLY)
        agent.client.hold_permission = anyio.Event()

        async def doomed() -> None:
            with pytest.raises(ConnectionError):
                await agent.conn.prompt(session_id=sid, prompt=[text_block("write it")])

        async with anyio.create_task_group() as tg:
            tg.start_soon(doomed)
            with anyio.fail_after(15):
                await agent.client.permission_asked.wait()
            run_id = await waiting_run(harness.store, sid)
            os.kill(agent.process.pid, signal.SIGKILL)
            await agent.process.wait()
    assert harness.config is not None
    command = [sys.executable, "-m", "awaken_stdio", "runs", "approve", run_id, "--config", str(harness.config)]
    command += ["--store", harness.store]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = await anyio.to_thread.run_sync(
        lambda: subprocess.run(command, capture_output=True, text=True, timeout=60, env=env, check=False)
    )
    assert done.returncode == 0, done.stderr
    assert (harness.workspace / "a.txt").read_text() == "written"
    async with open_store(harness.store) as store:
        run = await store.load_run(run_id)
    assert run is not None and run.status == "done"
    assert run.usage.input_tokens >= 2 * 1000  # both model calls, the one from the command line included
