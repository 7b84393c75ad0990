"""A real awaken-stdio process for the crash tests: ``python -m tests.e2e.crash_child MODE CONFIG STORE [RUN_ID]``.

Modes: ``start`` runs the agent once (it asks before ``append_line``) and prints ``WAITING <run_id>`` when the run
waits; ``hold`` does the same but keeps the run waiting live in this process (holding its thread) and prints
``DONE <status>`` when a decision from anywhere has let it finish; ``approve-and-die`` records an approval and is
killed (SIGKILL) after the decision is recorded and claimed, before the run resumes (with ``$CRASH_PAUSE_MARK`` the
process stops itself right before its first effect mark, and prints ``STOOD DOWN`` if it finds its claim gone on
SIGCONT); ``serve`` is a worker that
recovers and runs queued work until the run ``RUN_ID`` is ``done``, or (``reasked``) waits again for a call whose
earlier attempt's outcome is unknown, or (``settled``) either is done or waits.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import anyio

from awaken_stdio.app.app import App, load_settings, open_app
from awaken_stdio.app.dispatch import MailboxConfig
from awaken_stdio.contract.activation import RunActivation
from awaken_stdio.contract.errors import Fenced
from awaken_stdio.contract.events import AgentEvent, RunFinish
from awaken_stdio.contract.mailbox import EffectRecord, Fence
from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.stores import RunRecord
from awaken_stdio.contract.suspension import ToolCallResume

FAST = MailboxConfig(poll_every_s=0.05, sweep_every_s=0.2, renew_every_s=0.5)


def say(line: str) -> None:
    print(line, flush=True)


async def on_event(event: AgentEvent) -> None:
    if isinstance(event, RunFinish) and event.termination.type == "suspended":
        say(f"WAITING {event.run_id}")


async def start(app: App, hold: bool) -> None:
    activation = RunActivation(messages=[Message.user("append hello")], thread_id="t", wait_for_decisions=hold)
    try:
        result = await app.run(activation, on_event)
    except Fenced as exc:  # paused past its lease: the run went on elsewhere, and this process did nothing more
        say(f"STOOD DOWN {exc}")
        return
    say(f"DONE {result.status}")


def pause_before_marks(app: App, flag: str) -> None:
    """Stop this process (SIGSTOP) right before its first effect-ledger mark, once, after creating ``flag``: the
    instant a frozen disk or a debugger would catch it, between the decision and the effect."""
    ledger = app.store.mailbox
    started = ledger.effect_started

    async def pausing(effect: EffectRecord, fence: Fence | None = None) -> None:
        if not os.path.exists(flag):
            with open(flag, "w") as f:
                f.write(f"{os.getpid()}\n")
            os.kill(os.getpid(), signal.SIGSTOP)
        await started(effect, fence)

    ledger.effect_started = pausing  # type: ignore[method-assign]


async def approve_and_die(app: App, run_id: str) -> None:
    async def die(*args: Any, **kw: Any) -> Any:
        os.kill(os.getpid(), signal.SIGKILL)

    app.runtime.resume = die  # type: ignore[method-assign]
    await app.decide(run_id, [("perm_c1", ToolCallResume.approve())])


def reached(record: RunRecord | None, until: str) -> bool:
    if record is None:
        return False
    done = record.status == "done"
    asked = record.waiting is not None and any(t.outcome_unknown for t in record.waiting.tickets)
    return done if until == "done" else asked if until == "reasked" else done or record.status == "waiting"


async def serve(app: App, run_id: str, until: str) -> None:
    with anyio.fail_after(20):
        while not reached(await app.store.load_run(run_id), until):
            await anyio.sleep(0.05)
    say(f"REACHED {until}")


async def main(mode: str, config: str, store: str, run_id: str = "", until: str = "done") -> None:
    async with open_app(load_settings(config, store), serve=mode == "serve", mailbox=FAST) as app:
        if os.environ.get("CRASH_PAUSE_MARK"):
            pause_before_marks(app, os.environ["CRASH_PAUSE_MARK"])
        if mode in ("start", "hold"):
            await start(app, mode == "hold")
        elif mode == "approve-and-die":
            await approve_and_die(app, run_id)
        else:
            await serve(app, run_id, until)


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:])
