"""Session notices, compaction updates, the tool call's ``name`` and W3C trace context, end to end: the real agent
process, the official SDK client (raw ``initialize`` params where the SDK does not know a capability yet), every
message the agent sends validated against the pinned schema.

Notices go only to clients that opted in (``session.notices``), for what otherwise went into the agent's text or
nowhere: a tool that did not load, a session MCP server that failed to start, an approval decided on another
surface, a compaction. Compaction shows as ``compaction_update`` / ``compaction_summary_chunk`` only for clients
that advertised ``session.compaction``, for ``/compact`` and for the automatic one.
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
from acp import text_block

from .conftest import ROOT, Agent, Harness
from .test_acp_approvals import waiting_run

pytestmark = pytest.mark.anyio

NOTICES = {"session": {"notices": {}}}
COMPACTION = {"session": {"compaction": {}}}
LONG = "word " * 500
SUMMARY = "The user sent three long prompts."
MISSING_SERVER = [{"name": "gone", "command": "/nonexistent/awaken-test-server", "args": [], "env": []}]


def notices(agent: Agent, sid: str) -> list[dict[str, Any]]:
    return [u for u in agent.updates(sid) if u["sessionUpdate"] == "notice"]


def told(agent: Agent, sid: str) -> str:
    return "".join(u["content"]["text"] for u in agent.updates(sid) if u["sessionUpdate"] == "agent_message_chunk")


async def test_a_tool_that_did_not_load_is_a_notice_for_clients_that_take_them(harness: Harness) -> None:
    harness.configure([{"text": "Hello."}], agent='[tools]\nmodules = ["tests.protocols.raising_tools"]')
    async with harness.spawn(caps=NOTICES) as agent:
        sid = await agent.new_session()
        assert await agent.prompt(sid, "hi") == "end_turn"
        [notice] = notices(agent, sid)
        assert notice["severity"] == "warning" and notice["title"] == "A tool is not available"
        assert "boom at import" in notice["description"]
        assert told(agent, sid) == "Hello."  # no longer in the agent's words
    async with harness.spawn() as agent:  # a client without notices is told as before, in text
        sid = await agent.new_session()
        assert await agent.prompt(sid, "hi") == "end_turn"
        assert notices(agent, sid) == [] and "boom at import" in told(agent, sid)


async def test_a_session_mcp_server_that_cannot_start_is_a_notice_after_the_answer(harness: Harness) -> None:
    harness.configure([{"text": "Hello."}])
    async with harness.spawn(caps=NOTICES) as agent:
        with anyio.fail_after(40):
            sid = (await agent.raw("session/new", {"cwd": str(agent.workspace), "mcpServers": MISSING_SERVER}))[
                "sessionId"
            ]
        await anyio.sleep(0.2)
        _, after = agent.wire.around_answer("session/new", 1)
        shown = [m["params"]["update"] for m in after if m["params"]["update"]["sessionUpdate"] == "notice"]
        assert [n["title"] for n in shown] == ["MCP server gone failed to start"], shown
        assert shown[0]["severity"] == "warning" and notices(agent, sid) == shown
    async with harness.spawn() as agent:
        sid = (await agent.raw("session/new", {"cwd": str(agent.workspace), "mcpServers": MISSING_SERVER}))["sessionId"]
        await anyio.sleep(0.2)
        assert notices(agent, sid) == []  # never sent to a client that did not opt in


async def test_an_approval_decided_on_the_command_line_is_a_notice(harness: Harness) -> None:
    harness.configure(
        [{"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "x"}}]}, {"text": "Done."}]
    )
    async with harness.spawn(caps=NOTICES) as agent:
        agent.client.hold_permission = anyio.Event()  # the dialog stays open
        sid = await agent.new_session()
        stop: list[str] = []

        async def prompt() -> None:
            stop.append((await agent.conn.prompt(session_id=sid, prompt=[text_block("go")])).stop_reason)

        async with anyio.create_task_group() as tg:
            tg.start_soon(prompt)
            with anyio.fail_after(15):
                await agent.client.permission_asked.wait()
            run_id = await waiting_run(harness.store, sid)
            assert harness.config is not None
            command = [sys.executable, "-m", "awaken_stdio", "runs", "approve", run_id]
            command += ["--config", str(harness.config), "--store", harness.store]
            env = {**os.environ, "PYTHONPATH": str(ROOT)}
            done = await anyio.to_thread.run_sync(
                lambda: subprocess.run(command, capture_output=True, text=True, timeout=60, env=env, check=False)
            )
            assert done.returncode == 0, done.stderr
            with anyio.fail_after(10):
                while not stop:
                    await anyio.sleep(0.02)
            agent.client.hold_permission.set()
        assert stop == ["end_turn"]
        titles = [n["title"] for n in notices(agent, sid)]
        assert "An approval was decided elsewhere" in titles, titles
        call = next(u for u in agent.updates(sid) if u["sessionUpdate"] == "tool_call")
        assert call["name"] == "write_file" and call["title"].startswith("Write file")  # the tool's own name


def compaction_config(harness: Harness, **kw: Any) -> None:
    (harness.dir / "summary.json").write_text(json.dumps({"turns": [{"text": SUMMARY}]}))
    harness.configure(
        [{"text": t} for t in ("first", "second", "third", "fourth")],
        models='[models.summary]\nprovider = "scripted"\nscript = "summary.json"',
        agent='[agents.coder.compaction]\nsummary_model = "summary"\n' + kw.get("extra", ""),
        **{k: v for k, v in kw.items() if k != "extra"},
    )


async def test_compact_is_shown_as_a_compaction_with_its_summary(harness: Harness) -> None:
    compaction_config(harness)
    async with harness.spawn(caps=COMPACTION) as agent:
        sid = await agent.new_session()
        for i in (1, 2, 3):
            assert await agent.prompt(sid, LONG + str(i)) == "end_turn"
        assert await agent.prompt(sid, "/compact") == "end_turn"
        shown = [u for u in agent.updates(sid) if u["sessionUpdate"].startswith("compaction")]
        assert shown[0]["sessionUpdate"] == "compaction_update" and shown[0]["status"] == "in_progress"
        compaction_id = shown[0]["compactionId"]
        chunks = "".join(u["content"]["text"] for u in shown if u["sessionUpdate"] == "compaction_summary_chunk")
        assert chunks == SUMMARY
        last = shown[-1]
        assert (last["status"], last["compactionId"]) == ("completed", compaction_id)
        assert last["summary"] == [{"type": "text", "text": SUMMARY}]
        assert {u["compactionId"] for u in shown} == {compaction_id}
        assert told(agent, sid).endswith("The full history is kept.")  # the command still answers


async def test_automatic_compaction_is_shown_or_noticed_and_nothing_for_other_clients(harness: Harness) -> None:
    # a small context window: the third prompt's request crosses the threshold, and the agent compacts first
    compaction_config(harness, capabilities='{"context_window": 2000}', extra="keep_messages = 1\n")
    for caps, expected in ((COMPACTION, "compaction"), (NOTICES, "notice"), (None, None)):
        harness.store = harness.store.replace(".db", "x.db")  # a fresh store each time: the same conversation
        async with harness.spawn(caps=caps) as agent:
            sid = await agent.new_session()
            for i in (1, 2, 3):
                assert await agent.prompt(sid, LONG + str(i)) == "end_turn"
            kinds = {u["sessionUpdate"] for u in agent.updates(sid)}
            if expected == "compaction":
                done = [u for u in agent.updates(sid) if u["sessionUpdate"] == "compaction_update"]
                assert [u["status"] for u in done] == ["in_progress", "completed"], done
                assert done[-1]["summary"][0]["text"] == SUMMARY
            elif expected == "notice":
                [notice] = notices(agent, sid)
                assert notice["title"] == "Conversation compacted" and "earlier messages" in notice["description"]
            else:
                assert not kinds & {"compaction_update", "compaction_summary_chunk", "notice"}, kinds
            assert "fourth" not in told(agent, sid) and told(agent, sid).endswith("third")


async def test_trace_context_from_the_prompt_goes_out_on_the_requests_of_its_run(harness: Harness) -> None:
    """Without tracing in the agent the fields are passed on as they came; with it (a console exporter), the
    requests carry the same trace under the agent's own span."""
    harness.configure([{"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]}, {"text": "ok"}])
    (harness.workspace / "notes.txt").write_text("hello\n")
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    meta = {"traceparent": parent, "tracestate": "vendor=1", "baggage": "user=ada"}
    for env, same in (({"OTEL_SDK_DISABLED": "true"}, True), ({"OTEL_TRACES_EXPORTER": "console"}, False)):
        harness.store = harness.store.replace(".db", "t.db")
        async with harness.spawn(fs=True, env=env) as agent:
            sid = await agent.new_session()
            params = {"sessionId": sid, "prompt": [{"type": "text", "text": "read it"}], "_meta": meta}
            assert (await agent.raw("session/prompt", params))["stopReason"] == "end_turn"
            [read] = [m for d, m in agent.wire.messages if d == "incoming" and m.get("method") == "fs/read_text_file"]
            sent = read["params"]["_meta"]
            if same:
                assert sent == meta
            else:
                _, trace, span, _ = sent["traceparent"].split("-")
                assert trace == "0af7651916cd43dd8448eb211c80319c" and span != "b7ad6b7169203331"
                assert sent["baggage"] == "user=ada"
            [update] = [u for u in agent.updates(sid) if u["sessionUpdate"] == "tool_call"]
            assert update["name"] == "read_file"
        async with harness.spawn(fs=True, env=env) as agent:  # a prompt without a trace sends none on
            sid = await agent.new_session()
            agent.client.files[str(agent.workspace / "notes.txt")] = "hello\n"
            assert await agent.prompt(sid, "read it") == "end_turn"
            reads = [m for d, m in agent.wire.messages if d == "incoming" and m.get("method") == "fs/read_text_file"]
            assert reads and all("_meta" not in m["params"] for m in reads)


async def test_a_call_left_with_an_unknown_outcome_by_a_crash_is_a_notice(harness: Harness) -> None:
    running = {"id": "crashed", "name": "run_command", "arguments": {"command": "mkdir running && sleep 30"}}
    harness.configure(
        [{"tool_calls": [running]}, *[{"text": "Fine."}] * 3], agent='[agents.coder.permission]\ndefault = "ask"'
    )
    async with harness.spawn() as first:
        sid = await first.new_session()

        async def crashing() -> None:
            with pytest.raises(ConnectionError):
                await first.conn.prompt(session_id=sid, prompt=[text_block("go")])

        async with anyio.create_task_group() as tg:
            tg.start_soon(crashing)
            with anyio.fail_after(20):
                while not (harness.workspace / "running").exists():  # approved, and running: the agent dies now
                    await anyio.sleep(0.05)
            os.kill(first.process.pid, signal.SIGKILL)
            await first.process.wait()
    async with harness.spawn(caps=NOTICES) as second:
        await second.conn.load_session(session_id=sid, cwd=str(second.workspace), mcp_servers=[])
        second.client.answers = ["reject_once"]
        assert await second.prompt(sid, "again") == "end_turn"
        [notice] = [n for n in notices(second, sid) if n["title"] == "A tool call's outcome is unknown"]
        assert notice["severity"] == "warning" and "run_command (crashed)" in notice["description"]
