"""The scripted model: the file format, turn selection, streaming, errors, and its function twin."""

from __future__ import annotations

import json
import time
from importlib import resources
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest

from awaken_stdio.contract.errors import ConfigError, ProviderError
from awaken_stdio.contract.inference import (
    InferenceRequest,
    LlmExecutor,
    ModelCapabilities,
    ReasoningChunk,
    StopChunk,
    StreamAccumulator,
    StreamChunk,
    StreamResult,
    TextChunk,
    TokenUsage,
    ToolCallChunk,
    UsageChunk,
)
from awaken_stdio.contract.messages import ImageBlock, Message, TextBlock, ToolCall
from awaken_stdio.providers.scripted import (
    DEFAULT_CHUNK_CHARS,
    FunctionModel,
    ScriptedModel,
    ScriptTurn,
    main,
    script_json_schema,
)

pytestmark = pytest.mark.anyio

SCHEMA_FILE = Path(__file__).parents[2] / "schemas" / "scripted-model.schema.json"


def request(*messages: Message, system: str | None = None) -> InferenceRequest:
    return InferenceRequest(model="scripted", messages=list(messages) or [Message.user("hi")], system=system)


def after(assistant_turns: int) -> InferenceRequest:
    """A conversation in which the assistant already answered ``assistant_turns`` times."""
    messages = [Message.user("start")]
    for i in range(assistant_turns):
        messages += [Message.assistant(f"answer {i}"), Message.user(f"next {i}")]
    return request(*messages)


async def chunks(model: LlmExecutor, req: InferenceRequest) -> list[StreamChunk]:
    return [chunk async for chunk in model.stream(req)]


async def play(model: LlmExecutor, req: InferenceRequest) -> StreamResult:
    acc = StreamAccumulator()
    async for chunk in model.stream(req):
        acc.add(chunk)
    return acc.result()


def write(tmp_path: Path, content: str, name: str = "script.json") -> Path:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    return path


THREE_TURNS = {"turns": [{"text": "zero"}, {"text": "one"}, {"text": "two"}]}


# -- turn selection --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("turn", [0, 1, 2])
async def test_the_turn_played_is_the_number_of_assistant_messages(turn: int) -> None:
    result = await play(ScriptedModel(THREE_TURNS), after(turn))
    assert result.text == ["zero", "one", "two"][turn]


async def test_only_non_internal_assistant_messages_count() -> None:
    summary = Message(role="assistant", content=(TextBlock(text="summary of earlier talk"),), internal=True)
    interrupted = Message(role="assistant", content=(TextBlock(text="half an ans"),), interrupted=True)
    req = request(
        Message.system("be brief"),
        Message.user("a"),
        summary,
        interrupted,
        Message.user("b"),
        Message.tool("call_x", "tool output"),
    )
    assert (await play(ScriptedModel(THREE_TURNS), req)).text == "one"


async def test_a_compaction_summary_counts_the_turns_it_replaced() -> None:
    summary = Message(
        role="system",
        content=(TextBlock(text="<conversation-summary>two turns happened</conversation-summary>"),),
        internal=True,
        metadata={"compaction": {"assistant_turns": 2}},
    )
    req = request(summary, Message.user("and now?"))
    assert (await play(ScriptedModel(THREE_TURNS), req)).text == "two"


async def test_a_fresh_model_continues_a_thread_where_it_left_off(tmp_path: Path) -> None:
    path = write(tmp_path, json.dumps(THREE_TURNS))
    first = ScriptedModel.from_file(path)
    messages = [Message.user("start")]
    result = await play(first, request(*messages))
    messages += [Message.assistant(result.text), Message.user("go on")]
    restarted = ScriptedModel.from_file(path)  # as if the process had restarted with the stored thread
    assert (await play(restarted, request(*messages))).text == "one"


async def test_a_model_serves_many_conversations_at_once() -> None:
    model = ScriptedModel(THREE_TURNS)
    assert [(await play(model, after(n))).text for n in (2, 0, 1, 0)] == ["two", "zero", "one", "zero"]


# -- streaming -------------------------------------------------------------------------------------------------


async def test_a_turn_streams_thinking_text_tool_calls_usage_then_stop() -> None:
    model = ScriptedModel(
        {
            "turns": [
                {
                    "thinking": "plan",
                    "text": "I'll write it.",
                    "tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "hi"}}],
                }
            ]
        }
    )
    streamed = await chunks(model, request())
    assert [type(c) for c in streamed] == [ReasoningChunk, TextChunk, ToolCallChunk, UsageChunk, StopChunk]
    assert streamed[2] == ToolCallChunk(
        index=0, id="call_0_0", name="write_file", args_delta='{"path": "a.txt", "content": "hi"}'
    )


async def test_text_is_streamed_in_pieces_of_chunk_chars() -> None:
    text = "abcdefghij"
    model = ScriptedModel({"turns": [{"text": text, "chunk_chars": 4}]})
    streamed = await chunks(model, request())
    assert [c.text for c in streamed if isinstance(c, TextChunk)] == ["abcd", "efgh", "ij"]


async def test_text_chunks_default_to_32_characters() -> None:
    text = "x" * 70
    streamed = await chunks(ScriptedModel({"turns": [{"text": text}]}), request())
    assert DEFAULT_CHUNK_CHARS == 32
    assert [len(c.text) for c in streamed if isinstance(c, TextChunk)] == [32, 32, 6]


async def test_chunk_chars_zero_sends_everything_whole() -> None:
    turn = {"thinking": "t" * 100, "text": "x" * 100, "chunk_chars": 0}
    streamed = await chunks(ScriptedModel({"turns": [turn]}), request())
    assert [type(c) for c in streamed[:2]] == [ReasoningChunk, TextChunk]
    assert len(streamed) == 4


async def test_thinking_is_streamed_as_reasoning_before_the_text() -> None:
    turn = {"thinking": "let me think about it", "text": "Done.", "chunk_chars": 5}
    streamed = await chunks(ScriptedModel({"turns": [turn]}), request())
    reasoning = [c.text for c in streamed if isinstance(c, ReasoningChunk)]
    assert reasoning == ["let m", "e thi", "nk ab", "out i", "t"]
    assert streamed.index(TextChunk(text="Done.")) == len(reasoning)
    result = await play(ScriptedModel({"turns": [turn]}), request())
    assert [t.text for t in result.thinking] == ["let me think about it"]
    assert result.text == "Done."


async def test_an_empty_turn_streams_only_usage_and_stop() -> None:
    streamed = await chunks(ScriptedModel({"turns": [{}]}), request())
    assert [type(c) for c in streamed] == [UsageChunk, StopChunk]
    assert streamed[-1] == StopChunk(reason="end_turn")


async def test_tool_arguments_are_whole_unless_chunk_chars_is_set() -> None:
    call = {"name": "write_file", "arguments": {"path": "a.txt", "content": "x" * 100}}
    whole = await chunks(ScriptedModel({"turns": [{"tool_calls": [call]}]}), request())
    assert len([c for c in whole if isinstance(c, ToolCallChunk)]) == 1

    model = ScriptedModel({"turns": [{"tool_calls": [call, {"name": "list_directory"}], "chunk_chars": 10}]})
    pieces = [c for c in await chunks(model, request()) if isinstance(c, ToolCallChunk)]
    first_call = [c for c in pieces if c.index == 0]
    assert len(first_call) > 1
    assert (first_call[0].id, first_call[0].name) == ("call_0_0", "write_file")
    assert all(c.id is None and c.name is None for c in first_call[1:])
    assert all(len(c.args_delta) <= 10 for c in pieces)
    result = await play(model, request())
    assert result.tool_calls == [
        ToolCall(id="call_0_0", name="write_file", arguments=call["arguments"]),
        ToolCall(id="call_0_1", name="list_directory", arguments={}),
    ]
    assert not result.has_incomplete_tool_calls


async def test_tool_call_ids_default_to_call_turn_index_unless_given() -> None:
    model = ScriptedModel(
        {
            "turns": [
                {"text": "first"},
                {"tool_calls": [{"name": "a"}, {"name": "b", "id": "toolu_given"}, {"name": "c"}]},
            ]
        }
    )
    result = await play(model, after(1))
    assert [(c.id, c.name) for c in result.tool_calls] == [("call_1_0", "a"), ("toolu_given", "b"), ("call_1_2", "c")]


async def test_arguments_json_is_sent_verbatim() -> None:
    model = ScriptedModel({"turns": [{"tool_calls": [{"name": "write_file", "arguments_json": '{"path": "a.t'}]}]})
    streamed = await chunks(model, request())
    assert ToolCallChunk(index=0, id="call_0_0", name="write_file", args_delta='{"path": "a.t') in streamed
    assert (await play(model, request())).has_incomplete_tool_calls


async def test_unicode_arguments_are_not_escaped() -> None:
    model = ScriptedModel({"turns": [{"tool_calls": [{"name": "say", "arguments": {"text": "héllo ✓"}}]}]})
    streamed = await chunks(model, request())
    assert ToolCallChunk(index=0, id="call_0_0", name="say", args_delta='{"text": "héllo ✓"}') in streamed


# -- usage and stop reasons ------------------------------------------------------------------------------------


async def test_usage_given_is_reported_as_is() -> None:
    usage = {"input_tokens": 120, "output_tokens": 8, "cache_read_tokens": 100, "thinking_tokens": 3}
    result = await play(ScriptedModel({"turns": [{"text": "Done.", "usage": usage}]}), request())
    assert result.usage == TokenUsage(input_tokens=120, output_tokens=8, cache_read_tokens=100, thinking_tokens=3)


async def test_usage_left_out_is_estimated_at_four_characters_a_token() -> None:
    turn = {"thinking": "t" * 10, "text": "x" * 20, "tool_calls": [{"name": "f", "arguments_json": "{}"}]}
    req = request(
        Message.user("u" * 30),
        Message.user((TextBlock(text="v" * 9), ImageBlock(data="aGk=", mime_type="image/png"))),
        system="s" * 5,
    )
    result = await play(ScriptedModel({"turns": [turn]}), req)
    # input: 5 + 30 + 9 = 44 chars (images are not text) -> 11; output: 10 + 20 + 2 = 32 chars -> 8
    assert result.usage == TokenUsage(input_tokens=11, output_tokens=8)


async def test_estimates_round_up() -> None:
    result = await play(ScriptedModel({"turns": [{"text": "abcde"}]}), request(Message.user("a")))
    assert result.usage == TokenUsage(input_tokens=1, output_tokens=2)


async def test_usage_counts_left_out_are_estimated_and_the_rest_kept() -> None:
    turn = {"text": "x" * 8, "usage": {"output_tokens": 50, "cache_write_tokens": 7}}
    result = await play(ScriptedModel({"turns": [turn]}), request(Message.user("u" * 40)))
    assert result.usage == TokenUsage(input_tokens=10, output_tokens=50, cache_write_tokens=7)
    turn = {"text": "x" * 8, "usage": {"input_tokens": 500}}
    assert (await play(ScriptedModel({"turns": [turn]}), request())).usage == TokenUsage(
        input_tokens=500, output_tokens=2
    )


@pytest.mark.parametrize("reason", ["end_turn", "max_tokens", "refusal"])
async def test_stop_reason_given_is_reported(reason: str) -> None:
    turn = {"text": "cut", "tool_calls": [{"name": "f"}], "stop_reason": reason}
    assert (await play(ScriptedModel({"turns": [turn]}), request())).stop_reason == reason


async def test_stop_reason_defaults_to_tool_use_with_calls_else_end_turn() -> None:
    model = ScriptedModel({"turns": [{"tool_calls": [{"name": "f"}]}, {"text": "done"}]})
    assert (await play(model, after(0))).stop_reason == "tool_use"
    assert (await play(model, after(1))).stop_reason == "end_turn"


# -- delay and cancellation ------------------------------------------------------------------------------------


async def test_delay_ms_waits_before_the_first_chunk() -> None:
    model = ScriptedModel({"turns": [{"text": "late", "delay_ms": 50}]})
    start = time.monotonic()
    first = await anext(aiter(model.stream(request())))
    assert time.monotonic() - start >= 0.045
    assert first == TextChunk(text="late")


async def test_cancellation_cuts_the_delay_short() -> None:
    model = ScriptedModel({"turns": [{"text": "never", "delay_ms": 10_000}]})
    received: list[StreamChunk] = []
    start = time.monotonic()
    with anyio.move_on_after(0.05) as scope:
        received += [chunk async for chunk in model.stream(request())]
    assert scope.cancelled_caught
    assert time.monotonic() - start < 1
    assert received == []


async def test_an_error_turn_fails_after_its_delay_and_can_be_cancelled() -> None:
    model = ScriptedModel({"turns": [{"delay_ms": 10_000, "error": {"kind": "timeout"}}]})
    start = time.monotonic()
    with anyio.move_on_after(0.05):
        await chunks(model, request())
    assert time.monotonic() - start < 1
    model = ScriptedModel({"turns": [{"delay_ms": 30, "error": {"kind": "timeout"}}]})
    start = time.monotonic()
    with pytest.raises(ProviderError):
        await chunks(model, request())
    assert time.monotonic() - start >= 0.025


# -- errors ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "retryable"),
    [("rate_limited", True), ("timeout", True), ("invalid_request", False), ("unauthorized", False)],
)
async def test_an_error_turn_raises_a_provider_error_of_its_kind(kind: str, retryable: bool) -> None:
    model = ScriptedModel({"turns": [{"error": {"kind": kind, "message": f"scripted {kind}"}}]})
    with pytest.raises(ProviderError) as caught:
        await chunks(model, request())
    assert (caught.value.kind, caught.value.message, caught.value.retryable) == (kind, f"scripted {kind}", retryable)
    with pytest.raises(ProviderError):  # every call fails: a retry sees the same turn
        await chunks(model, request())


async def test_an_error_without_message_says_which_turn_failed() -> None:
    model = ScriptedModel({"turns": [{"text": "ok"}, {"error": {"kind": "rate_limited", "retry_after_s": 1.5}}]})
    with pytest.raises(ProviderError, match=r"^scripted rate_limited error \(turn 1\)$") as caught:
        await chunks(model, after(1))
    assert caught.value.retry_after_s == 1.5


async def test_an_error_with_times_fails_that_many_calls_then_streams_the_turn() -> None:
    model = ScriptedModel({"turns": [{"text": "recovered", "error": {"kind": "rate_limited", "times": 2}}]})
    for _ in range(2):
        with pytest.raises(ProviderError):
            await chunks(model, request())
    assert (await play(model, request())).text == "recovered"
    assert (await play(model, request())).text == "recovered"


async def test_past_the_last_turn_the_error_names_the_file_and_the_turn(tmp_path: Path) -> None:
    path = write(tmp_path, json.dumps(THREE_TURNS), "demo.json")
    with pytest.raises(ProviderError) as caught:
        await chunks(ScriptedModel.from_file(path), after(3))
    assert caught.value.kind == "invalid_request"
    assert caught.value.message == f"scripted model {path} has no turn 3 (it defines 3 turns: 0-2)"


async def test_past_the_last_turn_of_an_inline_script() -> None:
    with pytest.raises(ProviderError, match=r"^scripted model <inline script> has no turn 1 \(it defines 1 turn: 0\)$"):
        await chunks(ScriptedModel({"turns": [{"text": "only"}]}), after(1))


# -- invalid scripts -------------------------------------------------------------------------------------------


def load_error(tmp_path: Path, content: str) -> str:
    path = write(tmp_path, content)
    with pytest.raises(ConfigError) as caught:
        ScriptedModel.from_file(path)
    message = caught.value.message
    assert "\n" not in message
    return message.replace(str(path), "FILE")


def test_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^scripted model script .*nope\.json: file not found$"):
        ScriptedModel.from_file(tmp_path / "nope.json")


def test_a_directory_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^scripted model script .*: cannot read it: "):
        ScriptedModel.from_file(tmp_path)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"turns": [{"text": "hi"}', "invalid JSON: Expecting ',' delimiter (line 1, column 26)"),
        ("", "invalid JSON: Expecting value (line 1, column 1)"),
        ('[{"text": "hi"}]', "expected a JSON object with `turns`"),
        ('{"turns": [{"text": "hi", "txet": "typo"}]}', "turns[0].txet: unknown field"),
        (
            '{"turns": [{"tool_calls": [{"name": "f", "argments": {}}]}]}',
            "turns[0].tool_calls[0].argments: unknown field",
        ),
        ('{"turn": []}', "turns: required field missing; turn: unknown field"),
        ('{"turns": []}', "turns: List should have at least 1 item after validation, not 0"),
        ('{"turns": [{"text": 5}]}', "turns[0].text: Input should be a valid string"),
        ('{"turns": [{"delay_ms": "100"}]}', "turns[0].delay_ms: Input should be a valid integer"),
        ('{"turns": [{"delay_ms": -1}]}', "turns[0].delay_ms: Input should be greater than or equal to 0"),
        (
            '{"turns": [{"stop_reason": "tool_use"}]}',
            "turns[0].stop_reason: Input should be 'end_turn', 'max_tokens' or 'refusal'",
        ),
        (
            '{"turns": [{"error": {"kind": "overloaded"}}]}',
            "turns[0].error.kind: Input should be 'rate_limited', 'timeout', 'invalid_request' or 'unauthorized'",
        ),
        (
            '{"turns": [{"tool_calls": [{"name": ""}]}]}',
            "turns[0].tool_calls[0].name: String should have at least 1 character",
        ),
        (
            '{"turns": [{"tool_calls": [{"name": "f", "arguments": {}, "arguments_json": "{}"}]}]}',
            "turns[0].tool_calls[0]: give `arguments` or `arguments_json`, not both",
        ),
        (
            '{"turns": [{"tool_calls": [{"name": "f", "arguments": []}]}]}',
            "turns[0].tool_calls[0].arguments: Input should be a valid dictionary",
        ),
        ('{"turns": [{}], "capabilities": {"image": false}}', "capabilities.image: unknown field"),
    ],
)
def test_an_invalid_script_is_one_line_naming_the_file_and_the_problem(
    tmp_path: Path, content: str, expected: str
) -> None:
    assert load_error(tmp_path, content) == f"scripted model script FILE: {expected}"


def test_many_problems_are_summarised(tmp_path: Path) -> None:
    content = json.dumps({"turns": [{f"bad{i}": 1 for i in range(7)}]})
    assert load_error(tmp_path, content).endswith("turns[0].bad4: unknown field; and 2 more")


def test_an_invalid_inline_script_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"^scripted model script <inline script>: turns\[0\]\.txet: unknown field$"):
        ScriptedModel({"turns": [{"txet": "hi"}]})


def test_the_schema_key_is_allowed_for_editors(tmp_path: Path) -> None:
    path = write(tmp_path, json.dumps({"$schema": "../schemas/scripted-model.schema.json", **THREE_TURNS}))
    assert len(ScriptedModel.from_file(path).script.turns) == 3


# -- capabilities ----------------------------------------------------------------------------------------------


def test_capabilities_accept_images_and_audio_by_default() -> None:
    model = ScriptedModel(THREE_TURNS)
    assert isinstance(model, LlmExecutor)
    assert model.capabilities("anything") == ModelCapabilities(image_input=True, audio_input=True)


def test_capabilities_come_from_the_script() -> None:
    caps = {"context_window": 1000, "max_output_tokens": 100, "image_input": False, "audio_input": False}
    assert ScriptedModel({**THREE_TURNS, "capabilities": caps}).capabilities("m") == ModelCapabilities(**caps)


# -- FunctionModel ---------------------------------------------------------------------------------------------


async def test_function_model_plays_what_the_function_returns() -> None:
    seen: list[tuple[str, int]] = []

    def answer(req: InferenceRequest, turn: int) -> dict[str, Any]:
        seen.append((req.messages[-1].text, turn))
        if turn == 0:
            return {"text": "calling", "tool_calls": [{"name": "f", "arguments": {"x": 1}}], "chunk_chars": 3}
        return {"text": f"you said {req.messages[-1].text}"}

    model = FunctionModel(answer)
    first = await play(model, request(Message.user("hello")))
    assert (first.text, first.tool_calls, first.stop_reason) == (
        "calling",
        [ToolCall(id="call_0_0", name="f", arguments={"x": 1})],
        "tool_use",
    )
    second = await play(model, after(1))
    assert second.text == "you said next 0"
    assert seen == [("hello", 0), ("next 0", 1)]


async def test_function_model_accepts_async_functions_and_script_turns() -> None:
    async def answer(req: InferenceRequest, turn: int) -> ScriptTurn:
        await anyio.sleep(0)
        return ScriptTurn(thinking="hm", text=f"turn {turn}", error=None)

    model = FunctionModel(answer)
    result = await play(model, after(2))
    assert (result.text, [t.text for t in result.thinking]) == ("turn 2", ["hm"])
    assert result.usage is not None and result.usage.output_tokens == 2


async def test_function_model_streams_like_a_script() -> None:
    turn = {"thinking": "abc", "text": "x" * 40, "tool_calls": [{"name": "f"}], "usage": {"input_tokens": 1}}
    scripted = await chunks(ScriptedModel({"turns": [turn]}), request())
    assert await chunks(FunctionModel(lambda req, n: turn), request()) == scripted


async def test_function_model_errors_and_delays_like_a_script() -> None:
    model = FunctionModel(lambda req, n: {"delay_ms": 10_000, "error": {"kind": "unauthorized", "message": "no key"}})
    start = time.monotonic()
    with anyio.move_on_after(0.05):
        await chunks(model, request())
    assert time.monotonic() - start < 1
    model = FunctionModel(lambda req, n: {"error": {"kind": "unauthorized", "message": "no key"}})
    with pytest.raises(ProviderError, match=r"^no key$"):
        await chunks(model, request())


async def test_function_model_rejects_an_invalid_turn() -> None:
    model = FunctionModel(lambda req, n: {"txet": "typo"})
    with pytest.raises(ConfigError, match=r"^scripted model script function model turn 0: txet: unknown field$"):
        await chunks(model, request())


def test_function_model_capabilities() -> None:
    assert FunctionModel(lambda req, n: {}).capabilities("m") == ModelCapabilities(image_input=True, audio_input=True)
    caps = ModelCapabilities(context_window=10)
    assert FunctionModel(lambda req, n: {}, capabilities=caps).capabilities("m") is caps


# -- schema and demo -------------------------------------------------------------------------------------------


def test_the_committed_schema_matches_the_model() -> None:
    committed = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    assert committed == script_json_schema(), (
        "schemas/scripted-model.schema.json is stale; regenerate it with "
        "`.venv/bin/python -m awaken_stdio.providers.scripted --schema > schemas/scripted-model.schema.json`"
    )


def test_the_schema_command_prints_the_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--schema"]) == 0
    assert json.loads(capsys.readouterr().out) == script_json_schema()


def test_the_check_command_validates_scripts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = write(tmp_path, json.dumps(THREE_TURNS), "good.json")
    bad = write(tmp_path, '{"turns": [{"txet": 1}]}', "bad.json")
    assert main(["--check", str(good), str(bad)]) == 2
    out, err = capsys.readouterr()
    assert out == f"{good}: ok, 3 turns\n"
    assert err == f"scripted model script {bad}: turns[0].txet: unknown field\n"


@pytest.mark.parametrize(
    "script",
    [
        {"turns": [{"text": "hi", "txet": "typo"}]},
        {"turns": [{"delay_ms": "100"}]},
        {"turns": [{"tool_calls": [{"name": "f", "arguments": {}, "arguments_json": "{}"}]}]},
        {"turns": [{"stop_reason": "tool_use"}]},
    ],
)
def test_the_schema_rejects_what_the_loader_rejects(script: dict[str, Any]) -> None:
    # arguments + arguments_json is the one rule the schema cannot state; everything else must agree
    schema_ok = jsonschema.Draft202012Validator(script_json_schema()).is_valid(script)
    assert schema_ok == ("arguments_json" in json.dumps(script))
    with pytest.raises(ConfigError):
        ScriptedModel(script)


async def test_the_demo_script_is_valid_and_answers_past_its_end() -> None:
    demo = resources.files("awaken_stdio") / "data" / "demo-script.json"
    data = json.loads(demo.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))).validate(data)
    with resources.as_file(demo) as path:
        model = ScriptedModel.from_file(path)
    first = await play(model, request(Message.user("show me around")))
    assert [c.name for c in first.tool_calls] == ["update_plan"]
    last = len(data["turns"]) - 1
    for turns in (last, last + 1, last + 5):  # the closing words, then again for every later message
        answer = await play(model, after(turns))
        assert answer.stop_reason == "end_turn" and not answer.tool_calls and "The demo is over" in answer.text
