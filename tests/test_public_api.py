"""The public API: complete, sorted, importable, and cheap to import."""

from __future__ import annotations

import subprocess
import sys

import awaken_stdio


def test_all_is_sorted_and_every_name_resolves() -> None:
    assert awaken_stdio.__all__ == sorted(awaken_stdio.__all__, key=str.casefold)
    for name in awaken_stdio.__all__:
        assert getattr(awaken_stdio, name) is not None, name


def test_the_public_api_lists_every_name_a_user_needs() -> None:
    # what the README and the docs' translation table ("Coming from awaken (Rust)") promise from ``awaken_stdio``
    expected = {
        # running agents
        "AgentRuntime", "AgentSpec", "ModelSpec", "ModelPricing", "RunActivation", "RunEnvironment", "AgentRunResult",
        "RunIdentity",
        "TerminationReason", "TokenUsage", "AgentEvent", "Message", "build_runtime", "load_config", "open_runtime",
        "open_store", "Config",
        # models
        "LlmExecutor", "InferenceRequest", "StreamResult", "ScriptedModel", "FunctionModel",
        # tools
        "tool", "Tool", "ToolDescriptor", "ToolCallContext", "ToolOutput", "ToolResult", "ToolPreview", "FileChange",
        # what tools return beside text
        "ContentBlock", "TextBlock", "ImageBlock", "AudioBlock", "ResourceBlock", "ResourceLinkBlock",
        # plugins and state
        "Plugin", "PluginRegistrar", "Phase", "PhaseContext", "Block", "Suspend", "SetResult", "StateKey", "StateMap",
        "Snapshot", "MutationBatch", "StateCommand", "PersistedState", "StateStore", "ProfileKey", "ProfileAccess",
        "StateScope", "SuspendTicket", "ToolCallResume", "HandoffPlugin", "PermissionPlugin", "ObservabilityPlugin",
        "MetricsSink", "InMemorySink", "AgentMetrics",
        # errors
        "AwakenError", "UsageError", "ConfigError", "StateError", "RunError", "ThreadAlreadyRunning", "AgentNotFound",
        "InvalidResume", "DecisionTargetNotFound", "StoreError", "ProviderError", "ToolError", "ToolFailure",
    }  # fmt: skip
    assert set(awaken_stdio.__all__) == expected


def test_unknown_attribute_raises() -> None:
    try:
        awaken_stdio.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("expected AttributeError")


def test_package_import_loads_nothing_heavy() -> None:
    heavy = ("pydantic", "anyio", "sqlite3", "mcp", "acp")
    code = f"import sys, awaken_stdio; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
