"""The configuration file: its model and its validation (``assemble.py`` turns it into an ``AgentRuntime``).

Finding and reading the file (and the defaults without one) is ``config_file.py``'s, light enough for the protocol
servers' first answer; this module validates what it read. The pydantic models below are the single source of
``schemas/config.schema.json`` (``awaken-stdio config schema``); a test fails when the committed file drifts.
Every problem is reported as one ``ConfigError`` line that names the file and the field, which the CLI prints
before exiting with code 2.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from awaken_stdio.app.config_file import ConfigFile, default_config_data, read_config_file
from awaken_stdio.contract.errors import ConfigError
from awaken_stdio.runtime.compaction import CompactionPolicy

__all__ = [
    "AgentConfig",
    "Config",
    "LoadedConfig",
    "ModelConfig",
    "config_json_schema",
    "example_config",
    "load_config",
    "validate_config",
]

Behavior = Literal["allow", "ask", "deny"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class PricingConfig(_Model):
    """What the model costs, in US dollars per million tokens (cache prices default to the input price)."""

    input: float = Field(ge=0, description="Per million input tokens.")
    output: float = Field(ge=0, description="Per million output tokens.")
    cache_read: float | None = Field(None, ge=0, description="Per million input tokens read from the prompt cache.")
    cache_write: float | None = Field(None, ge=0, description="Per million input tokens written to the prompt cache.")


class ModelConfig(_Model):
    """A model an agent can use."""

    provider: Literal["openai", "anthropic", "scripted", "mcp_sampling"] = Field(
        description="openai (any OpenAI-compatible server via base_url), anthropic, scripted (a JSON script), or "
        "mcp_sampling (the model of the MCP client awaken-stdio mcp serves; `model` is only a hint)."
    )
    model: str = Field(
        "",
        description="The upstream model id, e.g. gpt-4.1 or claude-sonnet-4-5. An openai model with a base_url and "
        "no model uses the server's only model (asked of its /models).",
    )
    base_url: str | None = Field(None, description="An OpenAI-compatible endpoint (Ollama, vLLM, LM Studio...).")
    api_key_env: str | None = Field(None, description="The environment variable holding the API key.")
    api: Literal["chat", "responses"] = Field("chat", description="openai only: Chat Completions or Responses.")
    script: str | None = Field(None, description="scripted only: the script file, relative to the config file.")
    context_window: int | None = Field(None, gt=0, description="Tokens the model accepts; default per family.")
    max_output_tokens: int | None = Field(None, gt=0, description="Tokens the model may produce per call.")
    image_input: bool | None = Field(None, description="Whether the model takes images; default per family.")
    timeout_s: float | None = Field(None, gt=0, description="Timeout of one model call.")
    max_retries: int | None = Field(None, ge=0, description="Retries for rate limits, overload and 5xx.")
    pricing: PricingConfig | None = Field(None, description="Prices usage (e.g. the cost ACP clients show).")
    knowledge_cutoff: str | None = Field(None, description="When the model's training data ends, e.g. 2024-06.")


class PermissionRuleConfig(_Model):
    tool: str = Field(description='A tool name, glob, /regex/, or the primary-argument form "run_command(git *)".')
    behavior: Behavior


class PermissionConfig(_Model):
    default: Behavior | None = Field(
        default=None, description="With no matching rule. Unset: read-only tools are allowed, everything else asks."
    )
    rules: list[PermissionRuleConfig] = Field(default_factory=list)


_COMPACTION = CompactionPolicy()  # the one source of the defaults


class CompactionConfig(_Model):
    """Summarising the older part of a conversation as it nears the model's context window (history is kept)."""

    mode: Literal["auto", "off"] = Field(
        default=_COMPACTION.mode,
        description="auto: before a model call that reaches the threshold; /compact works either way.",
    )
    threshold: float = Field(default=_COMPACTION.threshold, gt=0, le=1, description="Share of the context window.")
    keep_messages: int = Field(
        default=_COMPACTION.keep_messages,
        ge=1,
        description="Recent messages kept verbatim (always the latest user turn).",
    )
    min_savings_ratio: float = Field(
        default=_COMPACTION.min_savings_ratio,
        ge=0,
        lt=1,
        description="A summary saving less of the estimate is not used.",
    )
    summary_model: str | None = Field(
        default=None, description="The id of a model in [models]; default the agent's own."
    )
    summary_max_tokens: int = Field(
        default=_COMPACTION.summary_max_tokens, gt=0, description="Length limit of a summary."
    )


class AgentConfig(_Model):
    """An agent: a model, a prompt and the tools it may use."""

    model: str = Field(description="The id of a model in [models].")
    system_prompt: str = ""
    description: str = ""
    tools: list[str] = Field(
        default_factory=lambda: ["*"], description='Names or globs; MCP tools are "<server>__<tool>".'
    )
    exclude_tools: list[str] = Field(default_factory=list)
    delegates: list[str] = Field(default_factory=list, description="Agents offered as the tools agent_run_<id>.")
    handoffs: list[str] = Field(default_factory=list, description="Agents this one may hand the conversation to.")
    max_rounds: int = Field(16, gt=0, description="Model calls per run before it stops with max_turn_requests.")
    max_tokens: int | None = Field(None, gt=0, description="Token budget of one run (input + output).")
    timeout_s: float | None = Field(None, gt=0, description="Wall-clock budget of one run.")
    tool_executor: Literal["sequential", "parallel"] = "sequential"
    plugins: list[str] = Field(
        default_factory=list,
        description="Plugins this agent uses, by id (their name), registered from Python: "
        "AgentRuntime(plugins=[...]) or runtime.add_plugin(...).",
    )
    expose_mcp: bool = Field(False, description='Publish this agent as the MCP tool "agent_<id>".')
    permission: PermissionConfig = Field(default_factory=PermissionConfig)
    compaction: CompactionConfig = Field(default_factory=CompactionConfig)


class StoreConfig(_Model):
    url: str | None = Field(default=None, description="memory://, file:///dir, sqlite:///path.db or postgresql://...")


class McpServerConfig(_Model):
    """An MCP server whose tools are offered as "<server>__<tool>"."""

    command: str | None = Field(None, description="stdio: the program to start.")
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = Field(None, description="streamable HTTP: the endpoint.")
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_s: float = Field(30.0, gt=0, description="Connect and list timeout.")
    call_timeout_s: float = Field(
        300.0, gt=0, description="How long one tool call may wait for its answer before it is cancelled."
    )
    enabled: bool = True


class ToolsConfig(_Model):
    builtin: bool = Field(default=True, description="Register the built-in file, search and command tools.")
    modules: list[str] = Field(default_factory=list, description="Python modules whose @tool functions are registered.")


class McpResourceConfig(_Model):
    """A resource ``awaken-stdio mcp`` serves; a URI with ``{variables}`` is a template whose text they fill."""

    name: str | None = None
    description: str | None = None
    mime_type: str | None = None
    text: str | None = Field(None, description="The contents; {variables} of a template URI are substituted.")
    file: str | None = Field(None, description="Or a file (relative to the config's directory): its contents.")

    @model_validator(mode="after")
    def _one_source(self) -> McpResourceConfig:
        if (self.text is None) == (self.file is None):
            raise ValueError("give exactly one of `text` or `file`")
        return self


class McpPromptArgumentConfig(_Model):
    name: str
    description: str = ""
    required: bool = True
    values: list[str] = Field(default_factory=list, description="What completion/complete offers for it.")


class McpPromptMessageConfig(_Model):
    """One message: ``text``, ``image``/``audio`` (a file), or ``resource`` (a URI, embedded with its contents)."""

    role: Literal["user", "assistant"] = "user"
    text: str | None = None
    image: str | None = None
    audio: str | None = None
    resource: str | None = Field(None, description="Embedded: this server's resource, or `text` as its contents.")
    mime_type: str | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> McpPromptMessageConfig:
        kinds = [k for k in ("text", "image", "audio", "resource") if getattr(self, k) is not None]
        if len(kinds) != 1 and kinds != ["text", "resource"]:
            raise ValueError("give one of `text`, `image`, `audio` or `resource` (with `text`: its contents)")
        return self


class McpPromptConfig(_Model):
    title: str | None = None
    description: str = ""
    arguments: list[McpPromptArgumentConfig] = Field(default_factory=list)
    messages: list[McpPromptMessageConfig] = Field(min_length=1)


class McpConfig(_Model):
    permission: Literal["allow", "ask"] = Field(
        default="allow", description="Direct tools/call of guarded tools: allow (the MCP host confirms) or ask."
    )
    resources: dict[str, McpResourceConfig] = Field(default_factory=dict, description="Extra resources, by URI.")
    prompts: dict[str, McpPromptConfig] = Field(default_factory=dict, description="Prompts, by name.")


class Config(_Model):
    """awaken-stdio configuration (TOML)."""

    default_agent: str | None = None
    store: StoreConfig = Field(default_factory=StoreConfig)
    models: dict[str, ModelConfig] = Field(default_factory=dict)
    agents: dict[str, AgentConfig] = Field(default_factory=dict)
    mcp_servers: dict[str, McpServerConfig] = Field(default_factory=dict)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    mcp: McpConfig = Field(default_factory=McpConfig)

    def check(self, source: str) -> None:
        """Cross-references a schema cannot express."""
        for agent_id, agent in self.agents.items():
            if agent.model not in self.models:
                raise ConfigError(f"{source}: agents.{agent_id}.model: no model {agent.model!r} in [models]")
            summary_model = agent.compaction.summary_model
            if summary_model is not None and summary_model not in self.models:
                raise ConfigError(
                    f"{source}: agents.{agent_id}.compaction.summary_model: no model {summary_model!r} in [models]"
                )
            for other in (*agent.delegates, *agent.handoffs):
                if other not in self.agents:
                    raise ConfigError(f"{source}: agents.{agent_id}: no agent {other!r} in [agents]")
        if self.default_agent is not None and self.default_agent not in self.agents:
            raise ConfigError(f"{source}: default_agent: no agent {self.default_agent!r} in [agents]")
        for name, model in self.models.items():
            if model.provider == "scripted" and not model.script:
                raise ConfigError(f"{source}: models.{name}: a scripted model needs `script`")
            served = model.provider == "openai" and model.base_url  # the server's only model, from its /models
            if model.provider not in ("scripted", "mcp_sampling") and not model.model and not served:
                raise ConfigError(f"{source}: models.{name}: `model` (the upstream model id) is required")
        for name, server in self.mcp_servers.items():
            if bool(server.command) == bool(server.url):
                raise ConfigError(f"{source}: mcp_servers.{name}: give exactly one of `command` or `url`")


@dataclass(slots=True, kw_only=True)
class LoadedConfig:
    config: Config
    file: ConfigFile  # what it was validated from

    @property
    def path(self) -> Path | None:
        """The config file, resolved; None: no config file, the defaults from the environment."""
        return self.file.path

    @property
    def base_dir(self) -> Path:
        return self.file.base_dir

    @property
    def source(self) -> str:
        return str(self.path) if self.path else self.file.source


def load_config(path: str | os.PathLike[str] | None = None) -> LoadedConfig:
    """:func:`~awaken_stdio.app.config_file.read_config_file` (which file, or the defaults), validated."""
    return validate_config(read_config_file(path))


def validate_config(file: ConfigFile) -> LoadedConfig:
    """The models of a config as read; a wrong field or reference raises ``ConfigError`` naming it."""
    return LoadedConfig(config=parse_config(file.data, file.source), file=file)


def parse_config(data: dict[str, Any], source: str) -> Config:
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_first_error(exc)}") from None
    config.check(source)
    return config


def _first_error(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False)
    parts = []
    for err in errors[:3]:
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        msg = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
        parts.append(f"{loc}: {msg}")
    more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
    return "; ".join(parts) + more


def default_config(env: dict[str, str] | None = None) -> Config:
    """No config file: one agent ``default`` whose model comes from the environment (none if no key is set)."""
    return Config.model_validate(default_config_data(env))


def config_json_schema() -> dict[str, Any]:
    schema = Config.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://github.com/awaken-stdio/awaken-stdio/schemas/config.schema.json"
    return schema


def example_config() -> str:
    """A commented config a new user can start from (``awaken-stdio config example``)."""
    from importlib.resources import files

    return files("awaken_stdio").joinpath("data/config.example.toml").read_text(encoding="utf-8")
