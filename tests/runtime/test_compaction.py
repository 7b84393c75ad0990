"""Compaction: token estimate, safe boundaries, the model's view, automatic and on-demand compaction, its config."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import anyio
import pytest

from awaken_stdio.app.assemble import agent_spec
from awaken_stdio.app.config import parse_config
from awaken_stdio.contract.activation import RunActivation
from awaken_stdio.contract.agent import AgentSpec
from awaken_stdio.contract.errors import ConfigError, ProviderError, ThreadAlreadyRunning
from awaken_stdio.contract.events import TextDelta
from awaken_stdio.contract.inference import InferenceRequest, ModelCapabilities
from awaken_stdio.contract.messages import ImageBlock, Message, TextBlock, ToolCall
from awaken_stdio.providers.scripted import FunctionModel
from awaken_stdio.runtime import compaction
from awaken_stdio.runtime.agent_runtime import AgentRuntime
from awaken_stdio.runtime.compaction import (
    SUMMARY_SYSTEM,
    CompactionPolicy,
    estimate_tokens,
    is_summary,
    message_tokens,
    model_view,
    plan_cut,
)
from awaken_stdio.runtime.executors import INTERRUPTED
from tests.runtime.helpers import FnTool, Recorder, StallingModel, call, tool_messages

pytestmark = pytest.mark.anyio

LONG = "word " * 500  # 2,500 characters: about 629 tokens
SUMMARY = "The user sent long messages; the agent answered each."


# -- builders --------------------------------------------------------------------------------------------------


def user(text: str) -> Message:
    return Message.user(text)


def asst(text: str = "", *call_ids: str) -> Message:
    return Message.assistant(text, [ToolCall(id=c, name="t", arguments={}) for c in call_ids])


def result(call_id: str) -> Message:
    return Message.tool(call_id, "result")


def summary_message(boundary: str, text: str = "earlier") -> Message:
    body = f"<conversation-summary>\n{text}\n</conversation-summary>"
    return Message(
        role="system", content=(TextBlock(text=body),), internal=True, metadata={"compaction": {"boundary": boundary}}
    )


class Models:
    """The agent's model (``main``) and a separate summariser; both record what they were asked."""

    def __init__(
        self, *, window: int = 4000, summary: str = SUMMARY, turns: list[dict[str, Any]] | None = None
    ) -> None:
        self.chat: list[InferenceRequest] = []
        self.summaries: list[InferenceRequest] = []
        self.summary = summary
        self.turns = turns or []
        self.summary_error: ProviderError | None = None
        caps = ModelCapabilities(context_window=window)
        self.main = FunctionModel(self._answer, capabilities=caps)
        self.summariser = FunctionModel(self._summarise)

    def _answer(self, request: InferenceRequest, turn: int) -> dict[str, Any]:
        if request.system == SUMMARY_SYSTEM:  # the agent's own model writes the summary
            return self._summarise(request, turn)
        self.chat.append(replace(request, messages=list(request.messages)))  # the loop's list grows afterwards
        return self.turns.pop(0) if self.turns else {"text": f"answer {len(self.chat)}"}

    def _summarise(self, request: InferenceRequest, turn: int) -> dict[str, Any]:
        self.summaries.append(request)
        if self.summary_error is not None:
            raise self.summary_error
        return {"text": self.summary}

    def runtime(self, *, summary_model: bool = True, tools: tuple[Any, ...] = (), **compaction: Any) -> AgentRuntime:
        section = {"threshold": 0.5, **compaction}
        if summary_model:
            section["summary_model"] = "summariser"
        spec = AgentSpec(id="default", model="main", sections={"compaction": section})
        return AgentRuntime(agents=[spec], models={"main": self.main, "summariser": self.summariser}, tools=tools)


async def converse(runtime: AgentRuntime, thread: str, *texts: str) -> None:
    for text in texts:
        await runtime.run_to_completion(RunActivation(messages=[Message.user(text)], thread_id=thread))


def texts(request: InferenceRequest) -> list[str]:
    return [m.text for m in request.messages]


# -- the estimate, the cut, the view ---------------------------------------------------------------------------


def test_token_estimate_is_four_plus_a_quarter_of_the_characters() -> None:
    assert message_tokens(Message.user("x" * 400)) == 104
    image = Message(role="user", content=(TextBlock(text="x" * 50), ImageBlock(data="AAAA", mime_type="image/png")))
    assert message_tokens(image) == 4 + 100 // 4  # a non-text block counts 50 characters
    with_call = Message.assistant("", [ToolCall(id="c", name="read", arguments={"path": "a"})])
    assert message_tokens(with_call) == 4 + (len("read") + len('{"path": "a"}')) // 4
    assert estimate_tokens([Message.user("x" * 400)] * 3) == 312


def test_the_cut_keeps_the_latest_user_turn_and_never_splits_a_call_from_its_result() -> None:
    view = [user("1"), asst("", "c1"), result("c1"), asst("done"), user("2"), asst("", "c2"), result("c2"), user("3")]
    assert plan_cut(view, 2) == 4  # the kept part starts at a real user message, after every answered call
    assert plan_cut(view, 1) == 7  # the latest user turn alone
    assert plan_cut(view, 5) is None  # nothing before the kept suffix starts a turn
    assert plan_cut(view, 20) is None
    ongoing = [user("1"), asst("a"), user("2"), asst("", "c"), result("c"), asst("", "d"), result("d")]
    assert plan_cut(ongoing, 1) == 2  # the whole latest turn is kept, however long


@pytest.mark.parametrize(
    "view",
    [
        [user("1"), asst("", "c1"), user("2"), asst("x"), user("3")],  # c1 is never answered: no safe cut after it
        [
            user("1"),
            asst("a"),
            Message(role="user", content=(TextBlock(text="note"),), internal=True),
            asst("b"),
        ],  # not a real user
        [summary_message("x"), user("1"), asst("a")],  # only the earlier summary precedes the latest turn
        [asst("a"), result("c")],  # no user message at all
    ],
)
def test_no_safe_boundary(view: list[Message]) -> None:
    assert plan_cut(view, 1) is None


def test_the_model_view_is_the_latest_summary_then_what_follows_its_boundary() -> None:
    u1, a1, u2, a2, u3 = user("1"), asst("a1"), user("2"), asst("a2"), user("3")
    assert model_view([u1, a1]) == [u1, a1]
    s1 = summary_message(a1.id)
    log = [u1, a1, u2, a2, u3, s1]  # the summary is appended after the turn that triggered it
    assert model_view(log) == [s1, u2, a2, u3]
    assert model_view(model_view(log)) == [s1, u2, a2, u3]  # a loaded history is a view already
    a3 = asst("a3")
    s2 = summary_message(a2.id)
    assert model_view([*log, a3, s2]) == [s2, u3, a3]  # the older summary is covered by the newer one
    lost = summary_message("lost")
    assert model_view([u1, a1, lost]) == [u1, a1, lost]  # a boundary it cannot find: nothing is dropped


def test_a_growing_conversation_is_searched_for_summaries_only_where_it_grew(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[Message] = []
    monkeypatch.setattr(compaction, "is_summary", lambda m: asked.append(m) or is_summary(m))
    log = [user("1"), asst("a1"), user("2"), asst("a2")]
    assert model_view(log) is log and len(asked) == 4
    log.append(user("3"))
    asked.clear()
    assert model_view(log) is log and asked == [log[-1]]  # asked before every inference: O(1) of the history
    s1 = summary_message(log[1].id)
    log.append(s1)
    assert model_view(log) == [s1, *log[2:5]]
    other = [log[0], asst("elsewhere")]  # the same first message, another conversation: searched whole
    asked.clear()
    assert model_view(other) == other and len(asked) == 2


async def test_deciding_to_compact_estimates_each_message_once_across_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    estimated: list[Message] = []
    monkeypatch.setattr(compaction, "message_tokens", lambda m: estimated.append(m) or message_tokens(m))
    models = Models(window=1_000_000)
    runtime = models.runtime()
    await converse(runtime, "t", *(f"turn {i}" for i in range(20)))
    assert len(models.chat) == 20 and not models.summaries
    assert len(estimated) == len({m.id for m in estimated}) == 39  # each once (the last answer asks nothing)


# -- automatic compaction --------------------------------------------------------------------------------------


@pytest.mark.parametrize("summary_model", [True, False], ids=["summary_model", "agent_model"])
async def test_auto_compaction_replaces_the_older_turns_with_an_internal_summary(summary_model: bool) -> None:
    models = Models()
    runtime = models.runtime(summary_model=summary_model)
    await converse(runtime, "t", LONG + "1", LONG + "2", LONG + "3")
    assert models.summaries == []  # about 1,900 tokens: under half the 4,000-token window
    await converse(runtime, "t", LONG + "4")

    [summarise] = models.summaries
    assert summarise.model == ("summariser" if summary_model else "main") and summarise.tools == []
    transcript = summarise.messages[0].text
    assert f"User: {LONG}1" in transcript and "Assistant: answer 2" in transcript and LONG + "3" not in transcript
    fourth = models.chat[3]
    head = fourth.messages[0]
    assert is_summary(head) and head.role == "system" and head.internal
    assert head.text == f"<conversation-summary>\n{SUMMARY}\n</conversation-summary>"
    assert texts(fourth)[1:] == [LONG + "3", "answer 3", LONG + "4"]

    stored = await runtime.store.load_messages("t")
    assert len(stored) == 9 and is_summary(stored[7])  # appended after the turn that needed it; nothing deleted
    assert [m.text for m in stored if m.role == "user"] == [LONG + str(i) for i in range(1, 5)]
    assert stored[7].metadata["compaction"]["boundary"] == stored[3].id  # covers u1 a1 u2 a2
    assert stored[7].metadata["compaction"]["assistant_turns"] == 2

    await converse(runtime, "t", "and now?")  # a new run loads the history trimmed to the summary
    assert texts(models.chat[4])[1:] == [LONG + "3", "answer 3", LONG + "4", "answer 4", "and now?"]
    assert models.chat[4].messages[0].id == stored[7].id and len(models.summaries) == 1


async def test_auto_compaction_inside_a_tool_loop_keeps_every_call_with_its_result() -> None:
    big = FnTool("big", big_result)
    turns = [
        {"text": "first"},
        {"tool_calls": [call("big", id="c1")]},
        {"tool_calls": [call("big", id="c2")]},
        {"text": "done"},
    ]
    models = Models(turns=turns)
    runtime = models.runtime(tools=(big,))
    await converse(runtime, "t", LONG + LONG, "go")
    assert len(models.summaries) == 1  # once the second result pushed the request over the threshold
    after = models.chat[-1]
    assert is_summary(after.messages[0])
    assert texts(after)[1] == "go" and tool_messages(after).keys() == {"c1", "c2"}
    assert INTERRUPTED not in tool_messages(after).values()
    calls = [c.id for m in after.messages for c in m.tool_calls]
    assert calls == ["c1", "c2"]


async def big_result(args: dict[str, Any], ctx: Any) -> str:
    return LONG


async def test_too_little_to_remove_is_skipped_without_calling_the_model() -> None:
    models = Models(window=200)
    runtime = models.runtime()
    await converse(runtime, "t", "x" * 300, "y" * 300, "z" * 300)  # over half of 200 tokens from the second run
    assert models.summaries == []
    assert not any(is_summary(m) for m in await runtime.store.load_messages("t"))
    outcome = await runtime.compact("t")
    assert outcome.summary is None and "under 1,024" in outcome.reason


async def test_a_summary_that_saves_too_little_is_not_applied() -> None:
    models = Models(summary=LONG * 3)
    runtime = models.runtime(mode="off")
    await converse(runtime, "t", LONG + "1", LONG + "2", LONG + "3")
    outcome = await runtime.compact("t")
    assert len(models.summaries) == 1 and outcome.summary is None
    assert outcome.describe().startswith("Nothing was compacted: the summary would save -")
    assert not any(is_summary(m) for m in await runtime.store.load_messages("t"))


async def test_a_failed_summary_leaves_the_run_uncompacted() -> None:
    models = Models()
    models.summary_error = ProviderError("rate_limited", "slow down")
    runtime = models.runtime()
    await converse(runtime, "t", LONG + "1", LONG + "2", LONG + "3", LONG + "4")
    assert len(models.summaries) == 1 and len(models.chat[3].messages) == 7  # whole
    assert not any(is_summary(m) for m in await runtime.store.load_messages("t"))


async def test_mode_off_never_compacts_on_its_own() -> None:
    models = Models()
    runtime = models.runtime(mode="off")
    await converse(runtime, "t", LONG + "1", LONG + "2", LONG + "3", LONG + "4")
    assert models.summaries == [] and len(models.chat[3].messages) == 7


# -- on demand -------------------------------------------------------------------------------------------------


async def test_compact_on_demand_appends_the_summary_whatever_the_size() -> None:
    models = Models(window=1_000_000)
    runtime = models.runtime()
    await converse(runtime, "t", LONG + "1", LONG + "2", LONG + "3")
    outcome = await runtime.compact("t")
    assert outcome.summary is not None and outcome.summarised == 4
    assert outcome.describe().startswith("Compacted the conversation: 4 earlier messages are now a summary")
    stored = await runtime.store.load_messages("t")
    assert len(stored) == 7 and stored[-1].id == outcome.summary.id
    await converse(runtime, "t", "next")
    assert texts(models.chat[-1])[1:] == [LONG + "3", "answer 3", "next"]
    assert "under 1,024" in (await runtime.compact("t")).reason  # the summary and one turn are left before it
    assert (await runtime.compact("unknown")).reason == "the conversation is empty"


async def test_compact_refuses_a_running_thread() -> None:
    stall = StallingModel("thinking")
    runtime = AgentRuntime(agents=[AgentSpec(id="default", model="main")], models={"main": stall})
    rec = Recorder()
    async with anyio.create_task_group() as tg:
        tg.start_soon(runtime.run, RunActivation(messages=[Message.user("hi")], thread_id="t"), rec)
        await rec.wait_for(TextDelta)
        with pytest.raises(ThreadAlreadyRunning):
            await runtime.compact("t")
        await runtime.cancel("t")


# -- config ----------------------------------------------------------------------------------------------------


def test_config_section_reaches_the_agent_spec() -> None:
    data = {
        "models": {"m": {"provider": "scripted", "script": "s.json"}, "small": {"provider": "scripted", "script": "s"}},
        "agents": {"a": {"model": "m", "compaction": {"threshold": 0.6, "summary_model": "small"}}},
    }
    config = parse_config(data, "test")
    section = agent_spec("a", config.agents["a"]).sections["compaction"]
    assert CompactionPolicy.from_section(section) == CompactionPolicy(threshold=0.6, summary_model="small")
    default = agent_spec(
        "b", parse_config({"models": data["models"], "agents": {"b": {"model": "m"}}}, "t").agents["b"]
    )
    assert CompactionPolicy.from_section(default.sections["compaction"]) == CompactionPolicy()


def test_an_unknown_summary_model_is_a_config_error() -> None:
    data = {
        "models": {"m": {"provider": "scripted", "script": "s.json"}},
        "agents": {"a": {"model": "m", "compaction": {"summary_model": "ghost"}}},
    }
    with pytest.raises(ConfigError, match=r"agents\.a\.compaction\.summary_model: no model 'ghost'"):
        parse_config(data, "test")
