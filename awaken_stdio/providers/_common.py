"""What the SDK-backed providers share: retries, error mapping, capability defaults, content flattening.

Both SDKs are generated from the same template (``APIStatusError`` with ``status_code`` and ``response``,
``APIConnectionError``, ``APITimeoutError``), so one :class:`ErrorMapper` handles both once it is handed the SDK's
classes. This module imports no SDK: the provider modules do, so a missing SDK fails there with an install hint.
"""

from __future__ import annotations

import logging
import os
import random
import time
from abc import abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, ClassVar, Self

import anyio

from awaken_stdio.contract.errors import ConfigError, ProviderError, ProviderErrorKind
from awaken_stdio.contract.inference import InferenceRequest, LlmExecutor, ModelCapabilities, StreamChunk
from awaken_stdio.contract.messages import (
    AudioBlock,
    ContentBlock,
    ImageBlock,
    ResourceBlock,
    ResourceLinkBlock,
    TextBlock,
)
from awaken_stdio.providers.families import family_capabilities

__all__ = [
    "ErrorMapper",
    "RetryPolicy",
    "SdkExecutor",
    "api_key",
    "capabilities_for",
    "close_stream",
    "content_parts",
    "install_hint",
    "parse_retry_after",
    "stream_error",
    "stream_with_retries",
]

log = logging.getLogger("awaken_stdio.providers")

# Local servers (Ollama, llama.cpp...) accept any key but the SDKs insist on one.
PLACEHOLDER_KEY = "not-needed"


def install_hint(provider: str, exc: ImportError) -> ConfigError:
    """The SDK (package ``provider``) is a dependency of awaken-stdio: missing, the installation is broken."""
    return ConfigError(
        f"the {provider} provider needs the {provider} package, a dependency of awaken-stdio: reinstall it "
        f"(pipx reinstall awaken-stdio, uv tool install --reinstall awaken-stdio, or pip install {provider} "
        f"in its environment) ({exc})"
    )


def api_key(env: Mapping[str, str], name: str, *, optional: bool) -> str:
    """The key from ``env[name]`` (else the one ``awaken-stdio login`` saved for it); ``optional`` (a custom base_url,
    no key variable configured) allows none."""
    from awaken_stdio.providers.credentials import env_key

    key = env_key(env, name)
    if key:
        return key
    if optional:
        return PLACEHOLDER_KEY
    raise ProviderError("unauthorized", f"{name} is not set")


# -- capabilities ----------------------------------------------------------------------------------------------


def capabilities_for(model: str, options: Mapping[str, Any]) -> ModelCapabilities:
    """Config options ``context_window``/``max_output_tokens``/``image_input`` over the family's defaults."""
    window, output, images = family_capabilities(model, options)
    return ModelCapabilities(context_window=window, max_output_tokens=output, image_input=images)


# -- content ---------------------------------------------------------------------------------------------------


def content_parts(content: tuple[ContentBlock, ...], *, images: bool) -> list[TextBlock | ImageBlock]:
    """Content as the text and images a chat model takes: resources become text that names their URI.

    Images the model cannot take, and audio, become a short note so the model knows something was there.
    """
    parts: list[TextBlock | ImageBlock] = []
    for block in content:
        match block:
            case TextBlock():
                parts.append(block)
            case ImageBlock() if images:
                parts.append(block)
            case ImageBlock():
                parts.append(
                    TextBlock(text=f"[image {block.uri or block.mime_type} omitted: this model takes no images]")
                )
            case ResourceBlock(uri=uri, text=str(text)):
                parts.append(TextBlock(text=f'<resource uri="{uri}">\n{text}\n</resource>'))
            case ResourceBlock(uri=uri, mime_type=mime):
                parts.append(TextBlock(text=f"[binary resource {uri} ({mime or 'unknown type'}) omitted]"))
            case ResourceLinkBlock(uri=uri, name=name):
                parts.append(TextBlock(text=f"[resource {name}: {uri}]"))
            case AudioBlock(mime_type=mime):
                parts.append(TextBlock(text=f"[audio ({mime}) omitted: this model takes no audio]"))
    return parts


# -- retries ---------------------------------------------------------------------------------------------------

_RETRIED: frozenset[str] = frozenset({"rate_limited", "overloaded", "provider", "stream_interrupted"})


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms``, or ``retry-after`` in seconds or as an HTTP date."""
    if ms := headers.get("retry-after-ms"):
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """Exponential backoff with jitter; a server's ``retry-after`` replaces the computed wait.

    A wait longer than ``max_delay_s``, or one that would take the call's waits past ``max_total_s``, is not made:
    the error goes to the caller (with ``retry_after_s``) rather than stalling an editor for minutes.
    """

    max_retries: int = 3
    base_delay_s: float = 0.5
    max_delay_s: float = 20.0
    max_total_s: float = 45.0

    def delay(self, attempt: int, error: ProviderError, waited: float) -> float | None:
        if attempt >= self.max_retries or error.kind not in _RETRIED:
            return None
        if error.retry_after_s is not None:
            wait = error.retry_after_s
            if wait > self.max_delay_s:
                return None
        else:
            wait = min(self.max_delay_s, self.base_delay_s * 2**attempt) * random.uniform(0.5, 1.0)
        return wait if waited + wait <= self.max_total_s else None


async def stream_with_retries(
    attempt: Callable[[], AsyncGenerator[StreamChunk]],
    to_error: Callable[[Exception, bool], ProviderError | None],
    policy: RetryPolicy,
    label: str,
) -> AsyncIterator[StreamChunk]:
    """Run ``attempt`` until it streams to the end, retrying transient failures only before its first chunk.

    Once a chunk has gone to the caller a retry would repeat it, so a failure then is raised as it is
    (``to_error(exc, True)`` turns a dropped connection into ``stream_interrupted``).
    """
    waited = 0.0
    retry = 0
    while True:
        started = False
        try:
            async with aclosing(attempt()) as chunks:
                async for chunk in chunks:
                    started = True
                    yield chunk
            return
        except Exception as exc:
            error = to_error(exc, started)
            if error is None:
                raise
            wait = None if started else policy.delay(retry, error, waited)
            if wait is None:
                if error is exc:
                    raise
                raise error from exc
        retry += 1
        waited += wait
        log.warning("%s: %s; retry %d of %d in %.2f s", label, error.message, retry, policy.max_retries, wait)
        await anyio.sleep(wait)


# -- errors ----------------------------------------------------------------------------------------------------

# An error body's ``type`` (both APIs, also in mid-stream error events) -> kind.
_BODY_TYPES: dict[str, ProviderErrorKind] = {
    "rate_limit_error": "rate_limited",
    "overloaded_error": "overloaded",
    "api_error": "provider",
    "server_error": "provider",
    "timeout_error": "timeout",
    "authentication_error": "unauthorized",
    "permission_error": "unauthorized",
    "not_found_error": "model_not_found",
    "invalid_request_error": "invalid_request",
    "rate_limit_exceeded": "rate_limited",
    "context_length_exceeded": "context_overflow",
    "model_not_found": "model_not_found",
    "invalid_api_key": "unauthorized",
}
_CONTEXT_PHRASES = (
    "context length",
    "context_length",
    "context window",
    "maximum context",
    "prompt is too long",
    "too many tokens",
    "input is too long",
    "exceeds the context",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorMapper:
    """Turns one SDK's exceptions into :class:`ProviderError` with a message a person can act on.

    ``secret`` (the API key) is blanked out of anything the server echoes back.
    """

    provider: str
    model: str
    base_url: str
    key_env: str
    secret: str
    status_error: type[Exception]
    api_error: type[Exception]
    connection_error: type[Exception]
    timeout_error: type[Exception]
    transport_error: type[Exception]  # httpx2's, which a stream read can raise unwrapped

    def __call__(self, exc: Exception, started: bool) -> ProviderError | None:
        if isinstance(exc, ProviderError):
            return exc
        if isinstance(exc, self.timeout_error):
            return ProviderError("timeout", f"{self.provider} at {self.base_url} timed out")
        if isinstance(exc, self.connection_error | self.transport_error):
            reason = self._redact(str(exc.__cause__ or exc) or type(exc).__name__)
            if started:
                message = f"{self.provider} stream from {self.base_url} broke off: {reason}"
                return ProviderError("stream_interrupted", message)
            return ProviderError("provider", f"cannot reach {self.provider} at {self.base_url}: {reason}")
        if isinstance(exc, self.status_error):
            return self._status(exc)
        if isinstance(exc, self.api_error):  # an error event in a 200 stream
            kind, detail = _describe_body(getattr(exc, "body", None))
            return self._error(kind or "provider", detail or str(exc), None)
        return None

    def _status(self, exc: Any) -> ProviderError:
        status: int = exc.status_code
        headers = exc.response.headers
        body_kind, detail = _describe_body(exc.body)
        detail = detail or str(exc)
        kind: ProviderErrorKind
        if status in (401, 403):
            kind = "unauthorized"
        elif status == 404:
            kind = "model_not_found"
        elif status == 408:
            kind = "timeout"
        elif status == 413 or body_kind == "context_overflow" or any(p in detail.lower() for p in _CONTEXT_PHRASES):
            kind = "context_overflow"
        elif status == 429:
            kind = "rate_limited"
        elif status in (503, 529):
            kind = "overloaded"
        elif status >= 500:
            kind = "provider"
        elif status == 200 and body_kind:  # an error event inside a stream the server had accepted
            kind = body_kind
        else:
            kind = "invalid_request"
        return self._error(kind, detail, parse_retry_after(headers), status)

    def _error(self, kind: ProviderErrorKind, detail: str, retry_after: float | None, status: int = 0) -> ProviderError:
        detail = self._redact(detail)
        code = f"HTTP {status}: " if status and status != 200 else ""
        if kind == "unauthorized":
            message = f"{self.provider} at {self.base_url} rejected the key in {self.key_env} ({code}{detail})"
        elif kind == "model_not_found":
            message = f"model {self.model} not found at {self.base_url} ({code}{detail})"
        elif kind == "context_overflow":
            message = f"the conversation is too long for {self.model}: {detail}"
        else:
            message = f"{self.provider} error from {self.base_url}: {code}{detail}"
        return ProviderError(kind, message, retry_after_s=retry_after)

    def _redact(self, text: str) -> str:
        return text.replace(self.secret, "***") if self.secret and self.secret != PLACEHOLDER_KEY else text


def stream_error(provider: str, code: str | None, message: str | None) -> ProviderError:
    """An error the server reported as an event inside a stream it had accepted."""
    kind, detail = _describe_body({"type": code, "message": message})
    return ProviderError(kind or "provider", f"{provider} stream failed: {detail or code or 'unknown error'}")


def _describe_body(body: Any) -> tuple[ProviderErrorKind | None, str | None]:
    """The kind named by an error body's ``type`` and its ``message`` (OpenAI nests both under ``error``)."""
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping):
            kind = _BODY_TYPES.get(str(inner.get("code"))) or _BODY_TYPES.get(str(inner.get("type")))
            message = inner.get("message")
            return kind, str(message) if message else None
        if isinstance(inner, str):
            return None, inner
    if isinstance(body, str) and body:
        return None, body[:500]
    return None, None


# -- the executor both providers build on ----------------------------------------------------------------------


async def close_stream(stream: Any) -> None:
    """Close an SDK stream even while the task is being cancelled, so the server sees the connection drop now."""
    with anyio.move_on_after(2, shield=True):
        await stream.close()


class SdkExecutor(LlmExecutor):
    """One configured model behind an SDK client: key lookup, retries and error mapping around ``_attempt``.

    The client is made on the first call, not at construction, so a config whose key is missing still loads (MCP
    serves its tools, ``doctor`` reports it) and the error names the variable to set. The executor serves its
    configured model; ``request.model`` is used only when none was configured. A provider names its SDK in the class
    attributes below and implements ``_attempt``.
    """

    provider: ClassVar[str]
    default_key_env: ClassVar[str]
    sdk: ClassVar[Any]  # the SDK module: its client class and its exception classes
    client_class: ClassVar[Callable[..., Any]]  # the SDK's async client
    transport_error: ClassVar[type[Exception]]  # httpx2's, which a stream read can raise unwrapped

    def __init__(
        self,
        model: str = "",
        *,
        base_url: str | None = None,
        api_key_env: str | None = None,
        timeout_s: float = 300.0,
        retry: RetryPolicy | None = None,
        options: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.key_env = api_key_env or self.default_key_env
        self.timeout_s = timeout_s
        self.retry = retry or RetryPolicy()
        self._options = dict(options or {})
        self._key_optional = base_url is not None and api_key_env is None
        self._env = os.environ if env is None else env
        self._client: Any = None
        self._errors: ErrorMapper | None = None

    @classmethod
    def from_options(cls, model: str, options: Mapping[str, Any]) -> Self:
        """Build from a config entry's options (``ModelConfig`` fields)."""
        max_retries = options.get("max_retries")
        return cls(
            model,
            base_url=options.get("base_url"),
            api_key_env=options.get("api_key_env"),
            timeout_s=options.get("timeout_s") or 300.0,
            retry=RetryPolicy() if max_retries is None else RetryPolicy(max_retries=max_retries),
            options=options,
        )

    def capabilities(self, model: str) -> ModelCapabilities:
        return capabilities_for(self.model or model, self._options)

    async def stream(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
        client, errors = self._connect()
        model = self.model or request.model
        caps = self.capabilities(model)
        label = f"{self.provider} {model}"
        async for chunk in stream_with_retries(
            lambda: self._attempt(client, model, request, caps), errors, self.retry, label
        ):
            yield chunk

    async def check(self, timeout_s: float = 5.0) -> str:
        """Ask the endpoint about the configured model (``doctor``): its key is set and the model is served.

        Raises ``ProviderError`` with the same actionable message a run would get.
        """
        client, errors = self._connect()
        try:
            with anyio.fail_after(timeout_s):
                await client.models.retrieve(self.model)
        except TimeoutError:
            raise ProviderError(
                "timeout", f"{self.provider} at {client.base_url} did not answer in {timeout_s:g} s"
            ) from None
        except Exception as exc:
            mapped = errors(exc, False)
            if mapped is None:
                raise
            raise mapped from exc
        return f"{self.provider} {self.model} at {str(client.base_url).rstrip('/')}"

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _connect(self) -> tuple[Any, ErrorMapper]:
        if self._client is None or self._errors is None:
            key = api_key(self._env, self.key_env, optional=self._key_optional)
            self._client = self._make_client(key)
            self._errors = self._make_errors(key, str(self._client.base_url).rstrip("/"))
        return self._client, self._errors

    def _make_client(self, key: str) -> Any:
        return self.client_class(api_key=key, base_url=self.base_url, timeout=self.timeout_s, max_retries=0)

    def _make_errors(self, key: str, base_url: str) -> ErrorMapper:
        return ErrorMapper(
            provider=self.provider,
            model=self.model,
            base_url=base_url,
            key_env=self.key_env,
            secret=key,
            status_error=self.sdk.APIStatusError,
            api_error=self.sdk.APIError,
            connection_error=self.sdk.APIConnectionError,
            timeout_error=self.sdk.APITimeoutError,
            transport_error=self.transport_error,
        )

    @abstractmethod
    def _attempt(
        self, client: Any, model: str, request: InferenceRequest, caps: ModelCapabilities
    ) -> AsyncGenerator[StreamChunk]:
        """One HTTP call streamed to its end; it must end with a ``StopChunk`` or raise."""
