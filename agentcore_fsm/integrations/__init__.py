"""Integrations, each behind an extra and each implementing a port of the runtime.

``providers`` (stream functions: faux, OpenAI, Anthropic), ``mcp`` (tools of MCP servers),
``otel`` (a run observer that traces), ``dbos`` (a durable engine). This package imports nothing
itself: an SDK is loaded only when the module that uses it is imported.
"""
