"""Bob: a bash-first coding agent served over the Agent Client Protocol."""

__version__ = "0.12.0"
