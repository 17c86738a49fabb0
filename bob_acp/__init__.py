"""Bob: a bash-first coding agent served over the Agent Client Protocol."""

__version__ = "0.13.0"
