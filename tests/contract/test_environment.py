"""Where a run runs is one typed, keyword-only record: no string-keyed bag of collaborators comes back beside it."""

from __future__ import annotations

import dataclasses

import pytest

from awaken_stdio.contract.activation import RunActivation
from awaken_stdio.contract.environment import ModeRef, RunEnvironment
from awaken_stdio.contract.tools import ToolCallContext
from awaken_stdio.runtime.plugins import PhaseContext

# the string-keyed fields these records may have: data, not collaborators
_DATA = {"overrides", "tool_args", "offered_tools"}


@pytest.mark.parametrize("record", [RunActivation, ToolCallContext, PhaseContext, RunEnvironment])
def test_the_records_a_run_goes_through_carry_its_environment_typed(record: type) -> None:
    fields = {f.name: str(f.type) for f in dataclasses.fields(record)}  # annotations as written
    keyed = [n for n, t in fields.items() if t.startswith(("dict[str", "Mapping[str")) and n not in _DATA]
    assert not keyed, f"{record.__name__}: string-keyed fields {keyed}; put what a run uses into RunEnvironment"
    assert all(f.kw_only for f in dataclasses.fields(record)), f"{record.__name__} is not keyword-only"
    assert record is RunEnvironment or fields["env"] == "RunEnvironment"


def test_a_mode_set_later_is_what_every_holder_of_the_environment_reads() -> None:
    env = RunEnvironment(mode=ModeRef("plan"))
    seen_by_a_call = dataclasses.replace(env, cwd="/ws")  # a run's copy shares the session's mode
    env.mode.set("bypass")
    assert seen_by_a_call.mode.value == "bypass"
    with pytest.raises(dataclasses.FrozenInstanceError):
        env.cwd = "/elsewhere"  # type: ignore[misc]
