"""Tool patterns: which calls a permission rule or a remembered answer applies to.

A pattern has a tool part and an optional argument part, ``tool(argument)``:

- the tool part is an exact name (``read_file``), a glob (``file_*``, ``mcp__github__*``, ``everything__*``) or a
  regular expression between slashes (``/(read|list)_.*/``, matched against the whole name; a regex tool part ends
  at the first ``/(``);
- the argument part (``run_command(git status*)``, ``Bash(npm *)``, ``write_file(src/*)``) is a glob on the call's
  *primary argument* (:func:`primary_argument`). A glob ending in ``" *"`` also matches the bare prefix, so
  ``git *`` matches ``git`` as well as ``git push``. A call without a string primary argument never matches an
  argument part.

Shell commands (a primary argument named ``command``) are matched one segment at a time: the command is split at
``;``, ``&&``, ``||``, ``|``, ``&``, newlines and substitutions (``$(``, backticks), so ``run_command(git *)`` says
nothing about ``git status && curl x | sh``. The split ignores quoting, which only ever yields more segments, so a
caller that needs every segment allowed errs towards asking.

Specificity (:attr:`ToolPattern.specificity`) breaks ties between matching rules of the same behaviour: an exact tool
part beats a glob, which beats a regex; at the same tool part an argument form (narrower) beats the bare tool part;
then fewer wildcards, then more literal characters.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from awaken_stdio.contract.errors import ConfigError

__all__ = ["COMMAND_ARGUMENT", "ToolPattern", "argument_values", "command_segments", "primary_argument"]

COMMAND_ARGUMENT = "command"

# The built-in tools' primary arguments; other tools use the first required string property of their schema.
_PRIMARY: dict[str, str] = {
    "run_command": COMMAND_ARGUMENT,
    "read_file": "path",
    "write_file": "path",
    "edit_file": "path",
    "list_directory": "path",
    "find_files": "pattern",
    "search": "pattern",
}
_WILDCARDS = re.compile(r"[*?\[]")
_SHELL_SEPARATORS = re.compile(r"&&|\|\||[;|&\n`]|\$\(|\)")

PatternKind = Literal["exact", "glob", "regex"]
_RANK: dict[PatternKind, int] = {"exact": 2, "glob": 1, "regex": 0}


def primary_argument(tool: str, schema: Mapping[str, Any] | None = None) -> str | None:
    """The argument an argument pattern is matched against: a built-in's known one, else the first required string
    property of ``schema`` (``None`` when there is none)."""
    if tool in _PRIMARY:
        return _PRIMARY[tool]
    if not schema:
        return None
    properties = schema.get("properties") or {}
    for name in schema.get("required") or ():
        prop = properties.get(name)
        if isinstance(prop, Mapping) and prop.get("type") == "string":
            return str(name)
    return None


def command_segments(command: str) -> list[str]:
    """The simple commands of a shell command line, stripped; empty pieces dropped (at least one is returned)."""
    segments = [s.strip() for s in _SHELL_SEPARATORS.split(command)]
    return [s for s in segments if s] or [command.strip()]


def argument_values(tool: str, args: Any, schema: Mapping[str, Any] | None = None) -> list[str | None]:
    """What argument parts are matched against for one call: each command segment, the normalised path, the raw
    value, or ``[None]`` when the tool has no string primary argument in ``args``."""
    key = primary_argument(tool, schema)
    value = args.get(key) if key is not None and isinstance(args, Mapping) else None
    if not isinstance(value, str):
        return [None]
    if key == COMMAND_ARGUMENT:
        return [*command_segments(value)]
    if key == "path":
        return [os.path.normpath(value)]  # "./.env" and "src/../.env" are ".env" to a rule
    return [value]


def _glob_matches(text: str, glob: str) -> bool:
    return fnmatch.fnmatchcase(text, glob) or (glob.endswith(" *") and text == glob[:-2])


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolPattern:
    """A parsed pattern; build it with :meth:`parse`."""

    text: str
    tool: str
    kind: PatternKind
    argument: str | None = None
    regex: re.Pattern[str] | None = None

    @staticmethod
    def parse(text: str, argument: str | None = None) -> ToolPattern:
        """Parse ``text``; ``argument``, when given, is the argument part (as remembered grants store it).

        Raises :class:`ConfigError` for an empty pattern, an unclosed argument part or an invalid regex.
        """
        tool, arg = _split(text.strip())
        if argument is not None:
            arg = argument
        if not tool:
            raise ConfigError(f"permission pattern {text!r}: the tool part is empty")
        if len(tool) > 1 and tool.startswith("/") and tool.endswith("/"):
            try:
                regex = re.compile(tool[1:-1])
            except re.error as exc:
                raise ConfigError(f"permission pattern {text!r}: invalid regular expression: {exc}") from exc
            return ToolPattern(text=text, tool=tool, kind="regex", argument=arg, regex=regex)
        return ToolPattern(text=text, tool=tool, kind="glob" if _WILDCARDS.search(tool) else "exact", argument=arg)

    def matches_tool(self, name: str) -> bool:
        if self.regex is not None:
            return self.regex.fullmatch(name) is not None
        return name == self.tool if self.kind == "exact" else fnmatch.fnmatchcase(name, self.tool)

    def matches(self, name: str, value: str | None) -> bool:
        """Whether the pattern covers a call of ``name`` whose primary argument (one segment of it) is ``value``."""
        if not self.matches_tool(name):
            return False
        if self.argument is None:
            return True
        return value is not None and _glob_matches(value, self.argument)

    @property
    def specificity(self) -> tuple[int, int, int, int]:
        """Higher is more specific (see the module docstring)."""
        parts = ("" if self.kind == "regex" else self.tool, self.argument or "")
        wildcards = sum(len(_WILDCARDS.findall(p)) for p in parts)
        literal = sum(len(_WILDCARDS.sub("", p)) for p in parts)
        return (_RANK[self.kind], int(self.argument is not None), -wildcards, literal)

    def __str__(self) -> str:
        return self.tool if self.argument is None else f"{self.tool}({self.argument})"


def _split(text: str) -> tuple[str, str | None]:
    """``tool(argument)`` -> ``(tool, argument)``; a regex tool part ends at the first ``/(``."""
    if not text.endswith(")"):
        return text, None
    if text.startswith("/"):
        end = text.find("/(", 1)
        if end < 0:
            return text, None
        return text[: end + 1], text[end + 2 : -1]
    start = text.find("(")
    if start < 0:
        raise ConfigError(f"permission pattern {text!r}: ')' without '('")
    return text[:start], text[start + 1 : -1]
