"""The holding process of ``bench_decision``: ``python -m bench._holder CONFIG STORE`` starts the crash tests' agent,
whose one call asks, keeps the run waiting live (holding its thread, default mailbox settings) and prints
``WAITING <run_id>``, then ``DONE <status>`` once a decision from another process let it finish."""

from __future__ import annotations

import sys

import anyio

from awaken_stdio.app.app import load_settings, open_app
from awaken_stdio.contract.activation import RunActivation
from awaken_stdio.contract.events import AgentEvent, RunFinish
from awaken_stdio.contract.messages import Message


async def on_event(event: AgentEvent) -> None:
    if isinstance(event, RunFinish) and event.termination.type == "suspended":
        print(f"WAITING {event.run_id}", flush=True)


async def main(config: str, store: str) -> None:
    async with open_app(load_settings(config, store)) as app:
        activation = RunActivation(messages=[Message.user("append hello")], thread_id="t", wait_for_decisions=True)
        result = await app.run(activation, on_event)
        print(f"DONE {result.status}", flush=True)


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:])
