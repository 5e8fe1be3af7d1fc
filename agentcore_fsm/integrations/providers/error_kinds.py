"""What kind of failure ended a request: each provider's errors mapped to an
:data:`~agentcore_fsm.core.messages.ErrorKind` (``AssistantMessage.error_kind``).

The kind is read from what the SDK raised (the OpenAI and Anthropic SDKs share the shape: an
``APIStatusError`` with ``status_code`` and the JSON ``body``, an ``APIError`` for an error event
inside a stream, ``APITimeoutError``/``APIConnectionError`` for the network), after the SDK's
own retries (``max_retries``) gave up:

========================  =============================================================
kind                      when
========================  =============================================================
``context_overflow``      the prompt is longer than the context window: OpenAI's code
                          ``context_length_exceeded`` (HTTP 400), Anthropic's
                          ``invalid_request_error`` "prompt is too long: ..." (HTTP 400),
                          HTTP 413 (``request_too_large``)
``rate_limit``            HTTP 429 or an error of type/code ``rate_limit_error`` /
                          ``rate_limit_exceeded`` (not ``insufficient_quota``: "other")
``overloaded``            HTTP 529 or 503, or ``overloaded_error`` (Anthropic, also inside
                          a stream)
``server_error``          any other HTTP 5xx, ``api_error``/``server_error`` inside a
                          stream, a connection that failed or a stream cut short
``timeout``               the request timed out (HTTP 408, the SDK's timeout)
``auth``                  HTTP 401 or 403
``invalid_request``       any other HTTP 4xx
``other``                 anything else (a refusal, a content filter, a bug)
========================  =============================================================
"""

from __future__ import annotations

from typing import Any

from agentcore_fsm.core.messages import ErrorKind

__all__ = ["RETRYABLE_KINDS", "error_kind", "kind_of_body"]

RETRYABLE_KINDS: tuple[ErrorKind, ...] = ("rate_limit", "overloaded", "server_error", "timeout")
"""The kinds another model (or the same one later) may well answer: what a
:class:`~agentcore_fsm.core.fallback.ModelFallback` moves on for by default."""

_OVERFLOW_CODES = frozenset(
    {"context_length_exceeded", "request_too_large", "string_above_max_length"}
)
_OVERFLOW_TEXTS = (
    "prompt is too long",
    "maximum context length",
    "context length",
    "context window",
    "too many tokens",
    "input is too long",
)
_BY_NAME: dict[str, ErrorKind] = {
    "rate_limit_error": "rate_limit",
    "rate_limit_exceeded": "rate_limit",
    "overloaded_error": "overloaded",
    "api_error": "server_error",
    "server_error": "server_error",
    "internal_server_error": "server_error",
    "timeout_error": "timeout",
    "authentication_error": "auth",
    "permission_error": "auth",
    "invalid_api_key": "auth",
}


def _fields(body: Any) -> tuple[set[str], str]:
    """The type and code names of an API error body (any nesting), and its message, lowered."""
    names: set[str] = set()
    message = ""
    if isinstance(body, dict):
        inner = body.get("error")
        if isinstance(inner, dict):
            body = inner
        elif isinstance(inner, str):
            message = inner
        for key in ("type", "code"):
            value = body.get(key)
            if isinstance(value, str) and value:
                names.add(value.lower())
        text = body.get("message")
        if isinstance(text, str):
            message = text
    elif isinstance(body, str):
        message = body
    return names, message.lower()


def kind_of_body(status: int | None, body: Any) -> ErrorKind | None:
    """The kind an HTTP status and/or an API error body say (None: they say nothing)."""
    names, message = _fields(body)
    if names & _OVERFLOW_CODES or status == 413:
        return "context_overflow"
    if (status in (None, 400) or "invalid_request_error" in names) and any(
        text in message for text in _OVERFLOW_TEXTS
    ):
        return "context_overflow"
    if "insufficient_quota" in names:
        return "other"
    if status == 429:
        return "rate_limit"
    if status in (503, 529):
        return "overloaded"
    for name in sorted(names):
        if name in _BY_NAME:
            return _BY_NAME[name]
    if status is None:
        return None
    if status == 408:
        return "timeout"
    if status >= 500:
        return "server_error"
    if status in (401, 403):
        return "auth"
    if status >= 400:
        return "invalid_request"
    return None


def error_kind(exc: BaseException) -> ErrorKind:
    """The kind of the failure ``exc`` (what a provider's request raised)."""
    status = getattr(exc, "status_code", None)
    body = getattr(exc, "body", None)
    kind = kind_of_body(status if isinstance(status, int) and status >= 400 else None, body)
    if kind is not None:
        return kind
    name = type(exc).__name__
    module = type(exc).__module__
    if name == "APITimeoutError" or isinstance(exc, TimeoutError):
        return "timeout"
    if name == "APIConnectionError" or module.startswith(("httpx", "httpcore", "h11")):
        cause = exc.__cause__ if exc.__cause__ is not None else exc
        if "Timeout" in type(cause).__name__ or "Timeout" in name:
            return "timeout"
        return "server_error"
    return "other"
