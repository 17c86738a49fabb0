"""The way to the client over one connection: session updates, Bob's own requests (permission
questions, the editor's files and terminals), and what the client said it can do."""

from __future__ import annotations

import time

from bob_acp.acp import protocol as p
from bob_acp.ids import new_id
from bob_acp.jsontext import mapping

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    from bob_acp.cancel import Cancel
    from bob_acp.jsonrpc.endpoint import Endpoint, Sent


class ClientCapabilities:
    """What the client's `initialize` offered (the parts Bob uses)."""

    __slots__ = ("terminal_output", "read_files", "write_files", "terminals", "retry_events", "notices",
                 "compaction", "forms", "boolean_options")

    def __init__(self, offered: dict[str, Any] | None = None):
        offered = offered or {}
        meta = mapping(offered.get("_meta"))
        fs = mapping(offered.get("fs"))
        session = mapping(offered.get("session"))
        # Updates the official SDKs' schema has and the stable one not yet: sent only to a client
        # that advertised them (`session.notices: {}`, `session.compaction: {}`).
        self.notices = isinstance(session.get("notices"), dict)
        self.compaction = isinstance(session.get("compaction"), dict)
        self.terminal_output = meta.get("terminal_output") is True  # Zed's display-only terminal (_meta)
        self.read_files = fs.get("readTextFile") is True
        self.write_files = fs.get("writeTextFile") is True
        self.terminals = offered.get("terminal") is True
        # Questions as forms the client shows (elicitation/create, `elicitation.form: {}`), and
        # on/off session options (`session.configOptions.boolean: {}`): only to a client that has them.
        self.forms = isinstance(mapping(offered.get("elicitation")).get("form"), dict)
        self.boolean_options = isinstance(mapping(session.get("configOptions")).get("boolean"), dict)
        # A client that asked for them (`_meta.bob.retries`, as bob-acp chat does) is told of each
        # retry of a model call with a `_bob/retry` notification (an ACP extension notification).
        self.retry_events = mapping(meta.get("bob")).get("retries") is True


class ClientChannel:
    def __init__(self) -> None:
        self.endpoint: Endpoint | None = None  # set once the connection is wired
        self.capabilities = ClientCapabilities()

    def _endpoint(self) -> Endpoint:
        if self.endpoint is None:
            raise RuntimeError("the client channel is used before its connection is wired")
        return self.endpoint

    def update(self, sid: str, update: dict[str, Any], give_up: Callable[[], bool] | None = None) -> None:
        """A session/update; while the client is not reading, it waits for room (`give_up` ends the wait)."""
        self._endpoint().notify(p.SESSION_UPDATE, {"sessionId": sid, "update": update}, give_up)

    def notify(self, method: str, params: dict[str, Any], give_up: Callable[[], bool] | None = None) -> None:
        self._endpoint().notify(method, params, give_up)

    def tell(self, sid: str, line: str) -> None:
        """One message to the user in the session, outside any turn."""
        self.update(sid, p.agent_chunk(line + "\n", new_id()))

    def notice(self, sid: str, title: str, description: str | None = None, severity: str = "warning",
               give_up: Callable[[], bool] | None = None) -> None:
        """Something the user should know that is not part of the conversation: a `notice` to a
        client that advertised notices, an agent message to any other."""
        if self.capabilities.notices:
            self.update(sid, p.notice(title, description, severity), give_up)
        else:
            marks = {"warning": "⚠️ ", "error": "❌ "}
            self.update(sid, p.agent_chunk(f"{marks.get(severity, '')}{title}{f' {description}' if description else ''}\n",
                                           new_id()), give_up)

    def ask(self, method: str, params: dict[str, Any], cancel: Cancel, timeout: float | None = None) -> Sent:
        """One request to the client (a permission question, a file, a terminal), once settled:
        its result, a PeerError, or cancelled (no answer; `timed_out` when `timeout` seconds
        passed first). A cancel of the turn ends the wait at once, and a request given up is
        withdrawn (with acp.cancelRequest), so the editor can close what it shows for it."""
        endpoint = self._endpoint()
        deadline = time.monotonic() + (timeout if timeout is not None else float("inf"))

        def give_up() -> bool:  # (a client that does not read holds the request's write too)
            return cancel.is_set() or time.monotonic() >= deadline

        sent = endpoint.request(method, params, give_up)
        if timeout is not None and sent.done() and not cancel.is_set() and time.monotonic() >= deadline:
            sent.timed_out = True  # (never written: the client read nothing for as long)
            return sent
        unsubscribe = cancel.subscribe(sent.cancel)
        try:
            sent.settled(None if timeout is None else max(0.0, deadline - time.monotonic()))
        finally:
            unsubscribe()
        if sent.cancelled() and (cancel.is_set() or sent.timed_out):
            endpoint.cancel_request(sent)
        return sent

    def wake_senders(self) -> None:
        """Wake every update waiting for room (a cancel: its turn stops waiting)."""
        self._endpoint().wake_senders()
