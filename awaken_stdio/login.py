"""``awaken-stdio login`` and ``logout``: the interactive set-up of a model provider's API key, and its removal.

``login`` asks which provider (unless the config's default model already names one, or ``--provider`` does), then the
key, read without echo (``getpass`` in a terminal; a line of standard input otherwise, for scripts), and saves it with
``providers/credentials.py``: in the OS keyring when ``keyring`` is importable and has a usable backend, else in a
0600 file in the user config directory. The key is never printed or logged. The runtime then finds it wherever it
reads that provider's variable (``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY`` or the model's ``api_key_env``); a variable
set in the environment still wins. With no config file, a saved key also picks the default model, as the variable
would. This is the ACP registry's terminal authentication (the ``login`` method an editor runs in a terminal).
"""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import Any, TextIO

__all__ = ["PROVIDERS", "login", "logout"]

# provider -> (what the person reads, the variable its key is read from)
PROVIDERS: dict[str, tuple[str, str]] = {
    "anthropic": ("Anthropic (Claude models)", "ANTHROPIC_API_KEY"),
    "openai": ("OpenAI (GPT models, or an OpenAI-compatible server)", "OPENAI_API_KEY"),
}


def login(args: argparse.Namespace, *, stdin: TextIO | None = None, out: TextIO | None = None) -> int:
    """The ``login`` command; 0 once a key is saved, 2 when none was given (nothing is saved then)."""
    from awaken_stdio.contract.errors import UsageError
    from awaken_stdio.providers.credentials import save_key

    source: TextIO = stdin if stdin is not None else sys.stdin
    shown: TextIO = out if out is not None else sys.stdout
    provider, variable = _provider(args, source, shown)
    label = PROVIDERS[provider][0] if provider in PROVIDERS else provider
    key = _read_key(f"API key for {label} ({variable}; input hidden): ", source, shown)
    if not key:
        raise UsageError("no API key was entered: nothing was saved")
    if any(c.isspace() for c in key):
        raise UsageError("an API key has no spaces: nothing was saved (paste the key alone)")
    where = save_key(variable, key, use_keyring=not getattr(args, "no_keyring", False))
    print(f"Saved the key for {variable} in {where}.", file=shown)
    print(
        "awaken-stdio uses it wherever that variable is unset (editors, `awaken-stdio chat`, `doctor`); "
        "`awaken-stdio logout` removes it.",
        file=shown,
    )
    return 0


def logout(args: argparse.Namespace, *, out: TextIO | None = None) -> int:
    """The ``logout`` command: every saved key removed (the environment's variables are left alone)."""
    from awaken_stdio.providers.credentials import forget_keys

    shown: TextIO = out if out is not None else sys.stdout
    removed = forget_keys()
    if removed:
        print(f"Removed the saved keys for {', '.join(removed)}.", file=shown)
    else:
        print("No key was saved: nothing to remove.", file=shown)
    return 0


def _provider(args: argparse.Namespace, stdin: TextIO, out: TextIO) -> tuple[str, str]:
    """The provider and its variable: ``--provider``, else the config's default model, else asked."""
    from awaken_stdio.contract.errors import UsageError

    chosen = getattr(args, "provider", None)
    if chosen:
        return chosen, PROVIDERS[chosen][1]
    configured = _configured(args)
    if configured is not None:
        return configured
    names = list(PROVIDERS)
    print("Which model provider?", file=out)
    for i, name in enumerate(names, 1):
        print(f"  {i}) {PROVIDERS[name][0]}", file=out)
    print(f"Choose 1-{len(names)} [1]: ", end="", file=out, flush=True)
    answer = stdin.readline().strip().lower()
    if not answer:
        return names[0], PROVIDERS[names[0]][1]
    if answer.isdigit() and 1 <= int(answer) <= len(names):
        name = names[int(answer) - 1]
        return name, PROVIDERS[name][1]
    if answer in PROVIDERS:
        return answer, PROVIDERS[answer][1]
    raise UsageError(f"unknown provider {answer!r}: choose 1-{len(names)} or one of {', '.join(names)}")


def _configured(args: argparse.Namespace) -> tuple[str, str] | None:
    """The default model's provider and key variable, when a config file names a model that needs a key."""
    from awaken_stdio.app.config_file import read_config_file
    from awaken_stdio.app.startup import default_model

    file = read_config_file(getattr(args, "config", None))
    if file.path is None:
        return None
    found = default_model(file.data)
    if found is None:
        return None
    model: dict[str, Any] = found[1]
    provider = str(model.get("provider") or "")
    variable = model.get("api_key_env") or (PROVIDERS[provider][1] if provider in PROVIDERS else None)
    return (provider, str(variable)) if variable else None


def _read_key(prompt: str, stdin: TextIO, out: TextIO) -> str:
    """The key, never echoed: from the terminal without echo, or one line of piped input."""
    if stdin is sys.stdin and stdin.isatty():
        return getpass.getpass(prompt).strip()
    print(prompt, file=out, flush=True)
    return stdin.readline().strip()
