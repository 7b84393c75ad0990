"""What a configured model accepts when nothing else says: per-family defaults, and a scripted model's.

The standard library only: the ACP server advertises the default model's prompt capabilities in its first answer,
before the providers (and pydantic) load; ``providers/_common.py`` builds its ``ModelCapabilities`` from the same
table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["SCRIPTED_MEDIA_INPUT", "family_capabilities"]

SCRIPTED_MEDIA_INPUT = True  # a scripted model takes images and audio unless its script says otherwise

# (name prefix, context window, max output tokens, image input); the first matching prefix wins, so the more
# specific prefixes come first. Local models' windows are what their servers usually run with, not their maximum.
_FAMILIES: tuple[tuple[str, int, int, bool], ...] = (
    ("gpt-5", 400_000, 128_000, True),
    ("gpt-4.1", 1_047_576, 32_768, True),
    ("gpt-4o", 128_000, 16_384, True),
    ("gpt-4-turbo", 128_000, 4_096, True),
    ("gpt-4", 8_192, 8_192, False),
    ("gpt-3.5", 16_385, 4_096, False),
    ("o1-mini", 128_000, 65_536, False),
    ("o1", 200_000, 100_000, True),
    ("o3", 200_000, 100_000, True),
    ("o4", 200_000, 100_000, True),
    ("claude-3-5-haiku", 200_000, 8_192, True),
    ("claude-3-haiku", 200_000, 4_096, True),
    ("claude-3-opus", 200_000, 4_096, True),
    ("claude-3", 200_000, 8_192, True),
    ("claude-opus-4-0", 200_000, 32_000, True),
    ("claude-opus-4-1", 200_000, 32_000, True),
    ("claude-opus-4-2025", 200_000, 32_000, True),
    ("claude", 200_000, 64_000, True),
    ("llama3.2-vision", 128_000, 8_192, True),
    ("llava", 32_768, 4_096, True),
    ("llama", 128_000, 8_192, False),
    ("qwen2.5-vl", 128_000, 8_192, True),
    ("qwen", 32_768, 8_192, False),
    ("mistral", 32_768, 8_192, False),
    ("mixtral", 32_768, 8_192, False),
    ("codestral", 32_768, 8_192, False),
    ("gemma3", 128_000, 8_192, True),
    ("gemma", 8_192, 8_192, False),
    ("deepseek", 128_000, 8_192, False),
    ("phi", 16_384, 4_096, False),
)
_UNKNOWN = (32_768, 4_096, False)  # an unknown (most likely local) model: small and text-only until configured


def family_capabilities(model: str, options: Mapping[str, Any]) -> tuple[int, int, bool]:
    """(context window, max output tokens, image input): config options over the family's defaults.

    Provider prefixes (``openai/gpt-4o`` on OpenRouter) and tags (``qwen2.5-coder:7b`` on Ollama) are ignored.
    """
    name = model.lower().rsplit("/", 1)[-1]
    window, output, images = next((f[1:] for f in _FAMILIES if name.startswith(f[0])), _UNKNOWN)
    return (
        options.get("context_window") or window,
        options.get("max_output_tokens") or output,
        images if options.get("image_input") is None else bool(options["image_input"]),
    )
