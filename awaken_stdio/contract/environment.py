"""Where a run runs: its working directory and roots, the editor's file system and terminal, the client it talks
back to, its permission mode, the client's trace context and model.

A protocol builds one per session (or per call) from what its client offers; the app rebuilds one from the session
record for a run resumed anywhere else (another process, after a restart, from the CLI), so an approved call runs
with exactly what an allowed one would have had. ``RunActivation.env`` carries it into the run; tools see it as
``ToolCallContext.env``, plugins as ``PhaseContext.env``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from awaken_stdio.contract.channel import ClientChannel, SamplingHost
from awaken_stdio.contract.tracing import TraceContext
from awaken_stdio.contract.workspace import FileSystem, ProcessRunner

__all__ = ["ModeRef", "RunEnvironment"]


class ModeRef:
    """A session's permission mode (``default``, ``accept_edits``, ``plan``, ``bypass``), shared by its runs: the
    permission gate reads it at each call, so a mode set during a turn applies from that turn's next call."""

    __slots__ = ("value",)

    def __init__(self, value: str = "default") -> None:
        self.value = value

    def set(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"ModeRef({self.value!r})"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunEnvironment:
    """What a run gets from the surface it runs for; every field may be absent (a bare run: the local disk and
    processes in the process's directory, default mode, nobody to ask).

    ``roots`` widen the workspace beyond ``cwd`` (ACP ``additionalDirectories``, absolute or relative to ``cwd``);
    ``fs``/``runner`` replace the local file system and processes (ACP ``fs/*``, ``terminal/*``); ``channel`` is the
    client a tool logs to, reports progress to, asks (elicitation) or samples; ``trace`` the W3C trace context the
    run's span is parented on; ``sampling`` the client's model the ``mcp_sampling`` provider asks.
    """

    cwd: str | None = None
    roots: tuple[str, ...] = ()
    fs: FileSystem | None = None
    runner: ProcessRunner | None = None
    channel: ClientChannel | None = None
    mode: ModeRef = field(default_factory=ModeRef)
    trace: TraceContext | None = None
    sampling: SamplingHost | None = None
