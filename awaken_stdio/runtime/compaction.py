"""Compaction: when a conversation nears the model's context window, its older part is replaced by a summary.

Nothing is deleted: the summary is appended to the durable log, and a run sees :func:`model_view` (the latest summary
and what follows it). ``docs/compaction.md`` has the policy: the estimate, where it cuts, what is stored, the events,
and why it is synchronous.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

import anyio

from awaken_stdio.contract.channel import SamplingHost
from awaken_stdio.contract.events import ActivitySnapshot, AgentEvent
from awaken_stdio.contract.ids import new_id
from awaken_stdio.contract.inference import InferenceRequest, LlmExecutor, StreamAccumulator, TextChunk, TokenUsage
from awaken_stdio.contract.messages import (
    COMPACTION_ACTIVITY,
    COMPACTION_KEY,
    Message,
    TextBlock,
    is_summary,
    model_turns,
)

__all__ = [
    "MIN_REMOVED_TOKENS",
    "SUMMARY_SYSTEM",
    "CompactionPolicy",
    "CompactionReport",
    "CompactionResult",
    "Compactor",
    "estimate_tokens",
    "is_summary",
    "message_tokens",
    "model_view",
    "plan_cut",
]

MIN_REMOVED_TOKENS = 1024
_RUNNING_TOTALS = 64  # conversations whose running token total a compactor keeps, most recently used first out
_NON_TEXT_CHARS = 50
_TOOL_RESULT_CHARS = 2000  # of each tool result in the transcript: file dumps add little to a summary
_OPEN, _CLOSE = "<conversation-summary>", "</conversation-summary>"

SUMMARY_SYSTEM = (
    "You summarise a conversation between a user and an AI coding agent so the agent can continue the work with "
    "the summary in place of the conversation. Keep: the user's goals and every explicit request or constraint; "
    "decisions and their reasons; files, paths, symbols and commands that matter, and what they showed; errors and "
    "how they were resolved; what is done and what remains. Be specific and concise. Write in the conversation's "
    "language. Output only the summary."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionPolicy:
    """An agent's ``compaction`` section; the defaults are the config file's."""

    mode: Literal["auto", "off"] = "auto"
    threshold: float = 0.8  # of the context window
    keep_messages: int = 2
    min_savings_ratio: float = 0.3
    summary_model: str | None = None  # a model id; None: the agent's own model
    summary_max_tokens: int = 4096

    @staticmethod
    def from_section(section: dict[str, Any] | None) -> CompactionPolicy:
        return CompactionPolicy(**(section or {}))


# -- tokens and the model's view -------------------------------------------------------------------------------


def message_tokens(m: Message) -> int:
    chars = 0  # loops, not sum() of generators: this runs for every message appended, and most parts are empty
    for b in m.content:
        chars += len(b.text) if type(b) is TextBlock else _NON_TEXT_CHARS
    for c in m.tool_calls:
        # str() of the arguments: as long as their JSON within a few characters (an estimate), at a third of the cost
        chars += len(c.name) + len(str(c.arguments))
    for t in m.thinking:
        chars += len(t.text)
    return 4 + chars // 4


def estimate_tokens(messages: list[Message]) -> int:
    return sum(message_tokens(m) for m in messages)


def model_view(messages: list[Message]) -> list[Message]:
    """The conversation as the model sees it: the latest summary, then the other messages logged after its boundary.

    ``messages`` is the durable log, or a view already (a loaded run's history starts with its summary). A summary
    whose boundary is missing from a longer list cannot be placed: the whole list is returned, losing nothing.
    """
    j = _latest_summary(messages)
    if j is None:
        return messages
    summary = messages[j]
    boundary = (summary.metadata or {})[COMPACTION_KEY]["boundary"]
    start = next((i + 1 for i in range(j - 1, -1, -1) if messages[i].id == boundary), 0 if j == 0 else None)
    if start is None:
        return messages
    return [summary, *(m for m in messages[start:] if not is_summary(m))]


# per conversation (keyed by its first message's id): messages searched, the last one's id, the latest summary's index
_SEARCHED: OrderedDict[str, tuple[int, str, int | None]] = OrderedDict()


def _latest_summary(messages: list[Message]) -> int | None:
    """The index of the latest summary in ``messages``. Asked several times a step of a growing conversation, so
    only the messages appended since the last search of the same one are searched (they are never changed)."""
    if not messages:
        return None
    key = messages[0].id
    searched, last, found = _SEARCHED.get(key) or (0, "", None)
    if searched > len(messages) or (searched and messages[searched - 1].id != last):
        searched, found = 0, None
    for i in range(len(messages) - 1, searched - 1, -1):
        if is_summary(messages[i]):
            found = i
            break
    _SEARCHED[key] = (len(messages), messages[-1].id, found)
    _SEARCHED.move_to_end(key)
    if len(_SEARCHED) > _RUNNING_TOTALS:
        _SEARCHED.popitem(last=False)
    return found


def _real_user(m: Message) -> bool:
    return m.role == "user" and not m.internal


def plan_cut(view: list[Message], keep_messages: int) -> int | None:
    """Where to cut ``view``: ``view[:cut]`` is summarised, the rest kept. ``None`` when no boundary is safe."""
    last_user = next((i for i in range(len(view) - 1, -1, -1) if _real_user(view[i])), None)
    limit = min(len(view) - keep_messages, -1 if last_user is None else last_user)
    if limit <= 0:
        return None
    open_calls: set[str] = set()
    raw = False  # the prefix holds something besides an earlier summary
    cut = None
    for i, m in enumerate(view[: limit + 1]):
        if raw and not open_calls and _real_user(m):
            cut = i
        raw = raw or not is_summary(m)
        open_calls.update(c.id for c in m.tool_calls)
        if m.tool_call_id is not None:
            open_calls.discard(m.tool_call_id)
    return cut


# -- the summary -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionResult:
    """What a compaction did: ``summary`` is the message to append, ``None`` when skipped (``reason`` says why)."""

    summary: Message | None
    reason: str = ""
    tokens_before: int = 0  # the conversation's estimate (the system prompt and tools are not compacted)
    tokens_after: int = 0
    summarised: int = 0  # messages the summary replaces
    usage: TokenUsage | None = None  # of the summary call

    def describe(self) -> str:
        if self.summary is None:
            return f"Nothing was compacted: {self.reason}."
        return (
            f"Compacted the conversation: {self.summarised} earlier messages are now a summary "
            f"(about {self.tokens_before:,} -> {self.tokens_after:,} tokens). The full history is kept."
        )


class CompactionReport:
    """Tells an event stream what one compaction does: ``ActivitySnapshot`` events of type ``compaction``, their
    ``message_id`` the compaction's id (``cmp_...``) and their content one of ``{"status": "in_progress"}``,
    ``{"chunk": text}`` (a piece of the summary as the model writes it), ``{"status": "completed", "summary":
    text}`` or ``{"status": "failed", "error": why}``; each status event also has a ``message`` saying it in a
    sentence. Nothing is told of a compaction skipped before the summary model was called."""

    __slots__ = ("emit", "id", "started")

    def __init__(self, emit: Callable[[AgentEvent], Awaitable[None]]) -> None:
        self.emit = emit
        self.id = new_id("cmp_")
        self.started = False

    async def _tell(self, content: dict[str, Any]) -> None:
        await self.emit(
            ActivitySnapshot(
                message_id=self.id, activity_type=COMPACTION_ACTIVITY, content=content, replace="chunk" not in content
            )
        )

    async def start(self) -> None:
        self.started = True
        await self._tell({"status": "in_progress", "message": "compacting the conversation"})

    async def chunk(self, text: str) -> None:
        if self.started and text:
            await self._tell({"chunk": text})

    async def finish(self, result: CompactionResult) -> None:
        if not self.started:
            return
        if result.summary is None:
            await self.fail(result.describe())
            return
        summary = _summary_text(result.summary)
        await self._tell({"status": "completed", "summary": summary, "message": result.describe()})

    async def fail(self, error: str, *, status: Literal["failed", "cancelled"] = "failed") -> None:
        if self.started:
            self.started = False
            await self._tell({"status": status, "error": error, "message": error})


class Compactor:
    """One agent's compaction: its policy, the model that writes summaries, and the context window it guards."""

    def __init__(self, policy: CompactionPolicy, executor: LlmExecutor, model_name: str, context_window: int) -> None:
        self.policy = policy
        self.executor = executor
        self.model_name = model_name
        self.context_window = context_window
        # per conversation (keyed by the id of its view's first message): messages counted, the last one's id, total
        self._totals: OrderedDict[str, tuple[int, str, int]] = OrderedDict()
        self._tools_key: object = None
        self._tools_tokens = 0

    def needed(self, view: list[Message], system_prompt: str, tools: list[dict[str, Any]]) -> bool:
        """Whether automatic compaction is on and the request (prompt, tools, conversation) reaches the threshold.

        Asked before every inference, so it costs the same at any length: a conversation's estimate is a running
        total to which only the messages appended since the last question are added (messages never change; a
        view whose counted prefix differs, e.g. after a summary, is summed anew). The runtime keeps one compactor
        per agent, so the totals outlive a run. The tool list's estimate is kept while the list object is."""
        if self.policy.mode == "off":
            return False
        if self._tools_key is not tools:
            self._tools_key, self._tools_tokens = tools, (len(json.dumps(tools, default=str)) // 4 if tools else 0)
        return (
            len(system_prompt) // 4 + self._tools_tokens + self._conversation_tokens(view)
            >= self.policy.threshold * self.context_window
        )

    def _conversation_tokens(self, view: list[Message]) -> int:
        if not view:
            return 0
        key = view[0].id
        counted, last, total = self._totals.get(key) or (0, "", 0)
        if counted > len(view) or (counted and view[counted - 1].id != last):
            counted = total = 0
        for i in range(counted, len(view)):
            total += message_tokens(view[i])
        self._totals[key] = (len(view), view[-1].id, total)
        self._totals.move_to_end(key)
        if len(self._totals) > _RUNNING_TOTALS:
            self._totals.popitem(last=False)
        return total

    async def compact(
        self, view: list[Message], report: CompactionReport | None = None, *, sampling: SamplingHost | None = None
    ) -> CompactionResult:
        """Plan, summarise, and check the savings; the caller appends ``result.summary`` to the durable log. What it
        does is told to ``report``, when given, from the summary model's call on. ``sampling``: the client's model
        of the run's environment, for a summary model that asks it."""
        if report is None:
            return await self._compact(view, None, sampling)
        try:
            result = await self._compact(view, report, sampling)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await report.fail("The compaction was cancelled.", status="cancelled")
            raise
        except Exception as exc:
            await report.fail(f"Compaction failed: {exc}" if str(exc) else "Compaction failed.")
            raise
        await report.finish(result)
        return result

    async def _compact(
        self, view: list[Message], report: CompactionReport | None, sampling: SamplingHost | None
    ) -> CompactionResult:
        before = estimate_tokens(view)
        cut = plan_cut(view, self.policy.keep_messages)
        if cut is None:
            return CompactionResult(
                summary=None, reason="no earlier turn can be summarised apart from the latest one", tokens_before=before
            )
        removed = estimate_tokens(view[:cut])
        if removed < MIN_REMOVED_TOKENS:
            reason = f"the earlier turns hold about {removed:,} tokens, under {MIN_REMOVED_TOKENS:,}"
            return CompactionResult(summary=None, reason=reason, tokens_before=before)
        if report is not None:
            await report.start()
        text, usage = await self._summarise(view[:cut], report, sampling)
        if not text:
            return CompactionResult(
                summary=None, reason="the model returned an empty summary", tokens_before=before, usage=usage
            )
        summarised = sum(1 for m in view[:cut] if not is_summary(m))
        metadata = {
            COMPACTION_KEY: {
                "boundary": view[cut - 1].id,
                "messages": summarised,
                "assistant_turns": model_turns(view[:cut]),
                "model": self.model_name,
            }
        }
        summary = Message(
            role="system", content=(TextBlock(text=f"{_OPEN}\n{text}\n{_CLOSE}"),), internal=True, metadata=metadata
        )
        after = before - removed + message_tokens(summary)
        if before - after < self.policy.min_savings_ratio * before:
            reason = f"the summary would save {1 - after / before:.0%}, under {self.policy.min_savings_ratio:.0%}"
            return CompactionResult(summary=None, reason=reason, tokens_before=before, tokens_after=after, usage=usage)
        return CompactionResult(
            summary=summary, reason="", tokens_before=before, tokens_after=after, summarised=summarised, usage=usage
        )

    async def _summarise(
        self, messages: list[Message], report: CompactionReport | None, sampling: SamplingHost | None
    ) -> tuple[str, TokenUsage | None]:
        # The transcript goes as text in one user message: no tools are offered, and providers refuse tool calls in
        # a history without tool definitions.
        prompt = f"Summarise this conversation:\n\n<transcript>\n{_transcript(messages)}\n</transcript>"
        request = InferenceRequest(
            model=self.model_name,
            messages=[Message.user(prompt)],
            system=SUMMARY_SYSTEM,
            max_output_tokens=self.policy.summary_max_tokens,
            enable_prompt_cache=False,
            sampling=sampling,
        )
        acc = StreamAccumulator()
        async for chunk in self.executor.stream(request):
            acc.add(chunk)
            if report is not None and type(chunk) is TextChunk:
                await report.chunk(chunk.text)
        return acc.text.strip(), acc.usage


def _summary_text(m: Message) -> str:
    return m.text.removeprefix(_OPEN).removesuffix(_CLOSE).strip()


def _transcript(messages: list[Message]) -> str:
    names: dict[str, str] = {}
    parts: list[str] = []
    for m in messages:
        if is_summary(m):
            parts.append(f"[Summary of the conversation before this point]\n{_summary_text(m)}")
        elif m.role == "user":
            parts.append(f"User: {_content(m)}")
        elif m.role == "assistant":
            if m.text:
                parts.append(f"Assistant: {m.text}")
            for c in m.tool_calls:
                names[c.id] = c.name
                parts.append(f"Assistant called {c.name} {json.dumps(c.arguments, ensure_ascii=False, default=str)}")
        elif m.role == "tool":
            text = m.text if len(m.text) <= _TOOL_RESULT_CHARS else m.text[:_TOOL_RESULT_CHARS] + " [...]"
            parts.append(f"Result of {names.get(m.tool_call_id or '', 'a tool')}: {text}")
        elif m.text:
            parts.append(f"Note: {m.text}")
    return "\n\n".join(parts)


def _content(m: Message) -> str:
    return " ".join(b.text if type(b) is TextBlock else f"[{b.type}]" for b in m.content)
