"""Bob: a bash-first coding agent served over the Agent Client Protocol.

How start-up works (what an editor waits for between spawning Bob and its answer to
`initialize`), said once here:

- Only what answering `initialize` needs is imported before it: the command line, the
  configuration (PyYAML only when there is a file), the log, the transport and the ACP server.
  Annotations are strings (`from __future__ import annotations`), and what they name is imported
  under `TYPE_CHECKING = False; if TYPE_CHECKING:`, so `typing` and the modules a type comes from
  are not imported to run.
- The engine, the tools, the sessions, the skills and the rooms of the ACP layer are
  `bob_acp.acp.lazy.LazyModule`s: imported on first use, or by the warm-up thread that starts once
  `initialize` is answered, so the first `session/new` finds them loaded.
- The first frames go through the standard library's json (bob_acp.jsonrpc.codec's `_Stdlib`,
  with orjson's behaviour); the warm-up switches to orjson, whose import costs more than all of
  Bob's work before the first answer.
- The log thread starts after a short delay and imports structlog then; lines logged before it
  wait in its queue.

`scripts/bench.py` measures each of these against the official SDKs' agents.
"""

__version__ = "0.20.0"
