"""What a decider is told before and after it acts: whether a call's outcome is unknown (the one rule every surface
reads), an approval refused for running such a call blind, and why a decision came too late (who won).

The mailbox service (``dispatch.py``) applies these; the CLI's ``runs list/show`` reads :func:`unknown_calls` too.
"""

from __future__ import annotations

from awaken_stdio.app.claims import DecisionSuperseded, owner_is_dead
from awaken_stdio.contract.errors import InvalidResume, OutcomeUnknown
from awaken_stdio.contract.ids import now_ms
from awaken_stdio.contract.mailbox import MailboxStore, outcome_unknown
from awaken_stdio.contract.stores import RunRecord, RunStore
from awaken_stdio.contract.suspension import Decisions

__all__ = ["not_waiting", "refuse_blind_reruns", "unknown_calls"]


async def unknown_calls(mailbox: MailboxStore, record: RunRecord, now: int) -> list[str]:
    """The run's pending calls whose outcome is unknown (``outcome_unknown``), as every decider and ``runs show``
    read them: a call started under the claim a live holder still has (its lease current) is running, not unknown."""
    if record.waiting is None:
        return []
    effects = await mailbox.open_effects(record.thread_id)
    if not effects:
        return []
    claims = await mailbox.list_dispatches(record.thread_id, ["claimed"])
    live = [c.claim_token for c in claims if (c.lease_until or 0) >= now and not owner_is_dead(c.claimed_by or "")]
    calls = [t.tool_call_id for t in record.waiting.tickets]
    return outcome_unknown(effects, calls, live_claim=live[0] if live else None)


async def refuse_blind_reruns(mailbox: MailboxStore, runs: RunStore, record: RunRecord, decisions: Decisions) -> None:
    """An approval that would run a call whose earlier attempt may have had its effect, without the person having
    chosen to run it again (or to record it as done), is refused (``OutcomeUnknown``) before anything is recorded."""
    blind = {target for target, d in decisions if d.action == "resume" and d.unknown is None}
    if not blind or record.waiting is None:
        return
    unknown = set(await unknown_calls(mailbox, record, now_ms()))
    named = [
        f"{t.tool_call_id} ({t.tool_name})"
        for t in record.waiting.tickets
        if t.tool_call_id in unknown and {t.tool_call_id, t.ticket_id} & blind
    ]
    if not named:
        return
    # the ledger is read before the claims: a holder that settled the call and let go in between has moved the run
    # on, and this decision came too late rather than blind
    latest = await runs.load_run(record.run_id)
    if latest is not None and latest.status != "waiting":
        raise await not_waiting(mailbox, latest)
    raise OutcomeUnknown(record.run_id, named)


async def not_waiting(mailbox: MailboxStore, record: RunRecord, ours: str | None = None) -> InvalidResume:
    """Why a decision cannot apply: the run moved on, and who moved it (the surface and process that decided)."""
    state = record.display_status
    if record.status == "waiting":
        return InvalidResume(f"run {record.run_id} is waiting for other calls")
    rows = await mailbox.list_dispatches(record.thread_id, ["acked", "claimed"])  # done, or doing it
    won = [
        r
        for r in rows
        if r.run_id == record.run_id
        and r.dispatch_id != ours
        and r.request.kind in ("decide", "cancel")
        and not r.run_error
    ]
    if not won:
        return DecisionSuperseded(f"run {record.run_id} is not waiting ({state}); this decision was not applied")
    w = max(won, key=lambda r: r.updated_at)
    verb = "decided" if w.request.kind == "decide" else "cancelled"
    who = f"from {w.request.origin} " if w.request.origin not in ("internal", "user") else ""
    return DecisionSuperseded(
        f"run {record.run_id} was already {verb} {who}by process {w.request.sender or w.claimed_by} "
        f"(it is now {state}); this decision was not applied"
    )
