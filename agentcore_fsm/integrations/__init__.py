"""Integrations, each behind an extra and each implementing a port of the runtime.

``providers`` (stream functions: faux, OpenAI, Anthropic), ``mcp`` (tools of MCP servers),
``otel`` (a run observer that traces), ``dbos`` and ``temporal`` (durable engines, one interface:
``durable_api``; by name: ``engines``). This package imports nothing
itself: an SDK is loaded only when the module that uses it is imported.
"""
