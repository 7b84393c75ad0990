"""The holding process of ``bench_decision``: ``python -m bench._holder CONFIG STORE [POLL_S]`` starts the crash
tests' agent, whose one call asks, keeps the run waiting live (holding its thread; default mailbox settings, or
polling every ``POLL_S``) and prints ``WAITING <run_id> <ticks>``, then ``DONE <status> <ticks>`` once a decision
from another process let it finish: ``ticks``, its mailbox waits so far that ran to their interval (polls no
wake-up asked for)."""

from __future__ import annotations

import sys

import anyio

from awaken_stdio.app.app import App, load_settings, open_app
from awaken_stdio.app.claims import MailboxConfig
from awaken_stdio.contract.activation import RunActivation
from awaken_stdio.contract.events import AgentEvent, RunFinish
from awaken_stdio.contract.messages import Message


async def main(config: str, store: str, poll_s: str = "") -> None:
    mailbox = MailboxConfig(poll_every_s=float(poll_s)) if poll_s else None
    async with open_app(load_settings(config, store), mailbox=mailbox) as app:

        async def on_event(event: AgentEvent) -> None:
            if isinstance(event, RunFinish) and event.termination.type == "suspended":
                print(f"WAITING {event.run_id} {ticks(app)}", flush=True)

        activation = RunActivation(messages=[Message.user("append hello")], thread_id="t", wait_for_decisions=True)
        result = await app.run(activation, on_event)
        print(f"DONE {result.status} {ticks(app)}", flush=True)


def ticks(app: App) -> int:
    return app.store.mailbox.wakeup.ticks


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:])
