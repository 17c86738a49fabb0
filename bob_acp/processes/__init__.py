"""Every process Bob starts and its end: children.py (started through a small supervisor process
of Bob's own, so that none outlives Bob however it ends, each labelled by its owner) and
supervisor.py (that process: standard library only, run as `python -I -S`). The bash tool, MCP
stdio servers and the sandbox's host all start their processes here."""
