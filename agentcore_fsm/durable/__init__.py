"""Durable runs of the agent loop on workflow engines.

:mod:`agentcore_fsm.durable.dbos` runs a loop as a DBOS workflow (the ``dbos`` extra). This
package imports nothing itself: the SDK is loaded only when that module is imported.
"""
