"""The editor's own files (`tools.clientFs`, with the client's `fs` capabilities): reads and
writes of the file tools go through `fs/read_text_file` and `fs/write_text_file`, so the model
sees an unsaved buffer and Bob's edits land in the editor (its review, its undo).

The tools reach it through a small port (read, write) and never see JSON-RPC. A read the editor
cannot give falls back to the disk (the reason in the log); a write it refuses is a failed
result. A cancel stops the wait at once; the request is then withdrawn (`$/cancel_request`, with
`acp.cancelRequest`).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from bob_acp.cancel import Cancel

from bob_acp.exceptions import ClientError

READ, WRITE = "fs/read_text_file", "fs/write_text_file"


class ClientFiles:
    """One session's way to the editor's files."""

    def __init__(self, server: Any, session_id: str, can_read: bool, can_write: bool):
        self._server = server
        self._sid = session_id
        self.can_read = can_read
        self.can_write = can_write

    def read(self, path: str, cancel: Cancel, line: int | None = None, limit: int | None = None) -> str | None:
        """The editor's text of `path` (from `line`, at most `limit` lines), or None: read the disk."""
        if not self.can_read:
            return None
        params: dict = {"sessionId": self._sid, "path": path}
        if line is not None:
            params["line"] = line
        if limit is not None:
            params["limit"] = limit
        try:
            result = self._ask(READ, params, cancel)
        except ClientError as exc:
            self._server.log.info(f"[acp] session {self._sid}: {READ} {path}: {exc}; reading the disk instead")
            return None
        content = result.get("content") if isinstance(result, dict) else None
        if not isinstance(content, str):
            self._server.log.info(f"[acp] session {self._sid}: {READ} {path}: no content in the answer; "
                                  "reading the disk instead")
            return None
        return content

    def write(self, path: str, content: str, cancel: Cancel) -> None:
        """Have the editor write `path`; ClientError when it refuses."""
        self._ask(WRITE, {"sessionId": self._sid, "path": path, "content": content}, cancel)

    def _ask(self, method: str, params: dict, cancel: Cancel) -> Any:
        from bob_acp.exceptions import Cancelled

        outcome = self._server.ask_client(method, params, cancel)
        if cancel.is_set():
            raise Cancelled()
        if outcome.closed:
            raise ClientError("the connection ended")
        if outcome.error is not None:
            error = outcome.error
            message = error.get("message") if isinstance(error, dict) else error
            raise ClientError(" ".join(str(message).split())[:300] or "an error")
        return outcome.result
