"""The version of this package (``agentcore-fsm --version`` prints the installed one)."""

__version__ = "0.1.0"
