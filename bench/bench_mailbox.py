"""Mailbox benchmarks on SQLite: suspend -> decide -> resume cycles per second, and recovery after a restart.

A cycle is what a person approving a tool call costs end to end: a run on a new thread asks before its tool (the run
is committed waiting, its dispatch acked), the decision is recorded as a dispatch and claimed, the run resumes from
the store, the tool runs between its two effect-ledger marks and the run finishes. Recovery: 10,000 runs wait for
approval, each held live by a process that then died (their claims owned by a dead pid); a new process opens the
store, its mailbox service starts (requeueing the dead claims in the background), and we time how long listing
every waiting run takes and how long approving one of them takes until its run has finished.
"""

from __future__ import annotations

import random
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from awaken_stdio.app.dispatch import MailboxConfig, MailboxService
from awaken_stdio.contract.activation import RunActivation
from awaken_stdio.contract.agent import AgentSpec
from awaken_stdio.contract.ids import new_id, now_ms
from awaken_stdio.contract.mailbox import DispatchRequest, RunDispatch
from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.stores import RunRecord, Store
from awaken_stdio.contract.suspension import PendingToolCall, SuspendTicket, Suspension, ToolCallResume
from awaken_stdio.contract.tools import Tool, ToolCallContext, ToolDescriptor
from awaken_stdio.providers.scripted import ScriptedModel
from awaken_stdio.runtime.agent_runtime import AgentRuntime
from awaken_stdio.runtime.plugins import GateDecision, PhaseContext, Plugin, PluginRegistrar, Suspend
from awaken_stdio.stores import open_store
from bench._begins import Begins

CYCLES = 1000
WAITING_RUNS = 10_000
CONCURRENCY = 16
SCRIPT = {"turns": [{"tool_calls": [{"name": "guarded", "arguments": {"n": 1}, "id": "c1"}]}, {"text": "done"}]}


class Guarded(Tool):
    descriptor = ToolDescriptor(name="guarded", description="A tool that needs approval.")

    async def execute(self, args: dict[str, Any], ctx: ToolCallContext) -> Any:
        return "ok"


class Ask(Plugin):
    """Asks before every call, like the permission plugin with ``default = "ask"``."""

    name = "bench_ask"

    def register(self, registrar: PluginRegistrar) -> None:
        registrar.tool_gate(self.gate)

    async def gate(self, ctx: PhaseContext) -> GateDecision | None:
        if ctx.resume_input is not None:
            return None
        call_id = ctx.tool_call_id or ""
        suspension = Suspension(
            id=f"perm_{call_id}",
            action="tool:PermissionConfirm",
            message="Permission required",
            parameters=ctx.tool_args,
        )
        return Suspend(
            ticket=SuspendTicket(
                suspension=suspension,
                pending=PendingToolCall(id=f"perm_{call_id}", name="permission_confirm", arguments=None),
            )
        )


def runtime_on(store: Store) -> AgentRuntime:
    runtime = AgentRuntime(tools=[Guarded()], plugins=[Ask()], store=store)
    runtime.add_agent(AgentSpec(id="default", model="m", plugins=["bench_ask"])).add_model("m", ScriptedModel(SCRIPT))
    return runtime


def row(metric: str, value: float, unit: str, **extra: Any) -> dict[str, Any]:
    return {"benchmark": "mailbox (sqlite)", "metric": metric, "value": round(value, 3), "unit": unit, **extra}


async def cycles_per_second(url: str, concurrency: int, counted: list[float] | None = None) -> tuple[float, float]:
    """``concurrency`` people approving at once, each on their own threads (SQLite still has one writer): cycles
    per second (wall-clock) and the CPU seconds of one cycle (the whole process: the event loop and the store's
    threads; what a loaded machine changes least). ``counted`` gets the SQLite transactions (BEGINs) of one cycle,
    from ten cycles run after the timed ones."""
    async with open_store(url) as store:
        service = MailboxService(runtime=runtime_on(store), config=MailboxConfig(dispatch_queued=False))

        async def cycle(i: int) -> None:
            waiting = await service.submit(RunActivation(messages=[Message.user("go")], thread_id=f"cycle-{i}"))
            done = await service.decide(waiting.run_id, [("perm_c1", ToolCallResume.approve())])
            assert done is not None and done.status == "completed", done

        async def person(first: int) -> None:
            for i in range(first, CYCLES, concurrency):
                await cycle(i)

        start, cpu = time.perf_counter(), time.process_time()
        async with anyio.create_task_group() as tg:
            for first in range(concurrency):
                tg.start_soon(person, first)
        rate, cpu = CYCLES / (time.perf_counter() - start), (time.process_time() - cpu) / CYCLES
        if counted is not None:
            begins = await Begins.on(store)
            for i in range(10):
                await cycle(CYCLES + i)
            counted.append(begins.count / 10)
        return rate, cpu


def dead_owner() -> str:
    """A claim owner naming a process of this machine that has exited."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return f"{socket.gethostname()}:{int(child.stdout)}:crashed"


async def crash_with_waiting_runs(url: str) -> list[str]:
    """Leave WAITING_RUNS runs waiting, each thread claimed by a process that died."""
    owner = dead_owner()
    async with open_store(url) as store:
        runtime = runtime_on(store)
        run_ids = []
        for i in range(WAITING_RUNS):
            thread = f"wait-{i}"
            result = await runtime.run(RunActivation(messages=[Message.user("go")], thread_id=thread))
            run_ids.append(result.run_id)
            held = RunDispatch(
                dispatch_id=new_id(),
                thread_id=thread,
                run_id=result.run_id,
                request=DispatchRequest(kind="run", sender=owner),
            )
            await store.mailbox.enqueue_and_claim(held, owner, 600_000, now_ms())
        return run_ids


async def list_waiting(store: Store) -> list[RunRecord]:
    out: list[RunRecord] = []
    cursor = None
    while True:
        page = await store.list_runs(statuses=["waiting"], limit=500, cursor=cursor)
        out.extend(page.items)
        if (cursor := page.next_cursor) is None:
            return out


async def recovery(url: str, run_ids: list[str]) -> tuple[float, float, int]:
    """After the crash: seconds to list every waiting run, seconds until an approved one has finished."""
    started = time.perf_counter()
    async with open_store(url) as store:
        service = MailboxService(runtime=runtime_on(store), config=MailboxConfig())
        async with anyio.create_task_group() as tg:
            await tg.start(service.run)
            waiting = await list_waiting(store)
            listed = time.perf_counter() - started
            target = random.Random(7).choice(run_ids)
            done = await service.decide(target, [("perm_c1", ToolCallResume.approve())])
            resumed = time.perf_counter() - started
            assert done is not None and done.status == "completed", done
            tg.cancel_scope.cancel()
    return listed, resumed, len(waiting)


async def run() -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        begins: list[float] = []
        rate, cpu = await cycles_per_second(f"sqlite://{Path(tmp)}/cycles.db", 1, begins)
        memory, memory_cpu = await cycles_per_second("memory://", 1)  # the baseline: the same cycle with no disk
        concurrent, concurrent_cpu = await cycles_per_second(f"sqlite://{Path(tmp)}/concurrent.db", CONCURRENCY)
        url = f"sqlite://{Path(tmp)}/recovery.db"
        prepare = time.perf_counter()
        run_ids = await crash_with_waiting_runs(url)
        prepared = time.perf_counter() - prepare
        listed, resumed, count = await recovery(url, run_ids)
    return [
        row(
            "suspend -> decide -> resume, one at a time",
            rate,
            "cycles/s",
            baseline=round(memory, 1),
            ratio=round(rate / memory, 2),
            note=f"{CYCLES} cycles; baseline: in memory; aim >= 500/s",
        ),
        row(
            "CPU per cycle, one at a time",
            cpu * 1e6,
            "us",
            baseline=round(memory_cpu * 1e6),
            note="the whole process, per cycle; baseline: in memory (ratio: what the disk costs on top)",
        ),
        row("SQLite transactions per approval cycle", begins[0], "BEGINs", note="goal <= 7"),
        row(f"suspend -> decide -> resume, {CONCURRENCY} at once", concurrent, "cycles/s", note="aim >= 500/s"),
        row(f"CPU per cycle, {CONCURRENCY} at once", concurrent_cpu * 1e6, "us", note="the whole process, per cycle"),
        row(f"restart: list {count:,} waiting runs", listed, "s", note="from opening the store; aim <= 1 s"),
        row("restart: approve one, run finished", resumed, "s", note="from opening the store; aim <= 5 s"),
        row(f"setup: {WAITING_RUNS:,} runs suspended", WAITING_RUNS / prepared, "runs/s"),
    ]
