"""The record of a run: its codec, the journal interface, memory and SQLite run stores, the
JSONL recording. Knows nothing of the driver."""
