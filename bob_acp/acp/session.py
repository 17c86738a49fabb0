"""What the ACP layer holds per session and per prompt."""

from __future__ import annotations

import threading

from bob_acp.acp.lazy import loaded
from bob_acp.cancel import Cancel

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from bob_acp.acp.runtime import Runtime
    from bob_acp.acp.turn_queue import Ticket
    from bob_acp.context.skills import Catalog
    from bob_acp.engine import Engine
    from bob_acp.engine.conversation import Conversation
    from bob_acp.files.workspace import Workspace
    from bob_acp.mcp.servers import McpSet


class Turn:
    """One prompt: its cancel, its place in the turn queue, and whether its answer is written.

    The answer is written holding `lock`, and a cancel is set holding it too, so a cancel read
    before the response was written always makes the response `cancelled`."""

    __slots__ = ("cancel", "lock", "answered", "ticket")

    def __init__(self, ticket: Ticket):
        self.cancel = Cancel()
        self.lock = threading.Lock()
        self.answered = False
        self.ticket = ticket

    def cancel_now(self, reason: str | None = None) -> bool:
        """Cancel unless the answer is already written; False when it was too late."""
        with self.lock:
            if self.answered:
                return False
            self.cancel.set(reason)
            return True


Notice = tuple[str, "str | None", str]  # (title, description, severity)


class News:
    """What a session's user must hear that is not the model's: to a client that shows notices,
    a notice once the client knows the session's id; to any other, a line in the session's next
    turn (a message outside a turn may be shown nowhere), on a line of its own. One lock keeps a
    notice added while the session is announced from being lost between the two."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[Notice] = []
        self.announced = False  # its session/new, load or resume is answered: the client knows its id

    def add(self, item: Notice) -> None:
        with self._lock:
            self._items.append(item)

    def announce(self) -> None:
        with self._lock:
            self.announced = True

    def take(self, notices: bool, in_turn: bool) -> list[Notice]:
        """What can be said now: everything, to a client that shows notices once it knows the
        session, or to any other within a turn; nothing otherwise (it waits)."""
        with self._lock:
            if not ((notices and self.announced) or in_turn):
                return []
            items, self._items = self._items, []
            return items


class Session:
    def __init__(self, sid: str, conv: Conversation, catalog: Catalog, runtime: Runtime, engine: Engine):
        self.id = sid
        self.conv = conv
        self.catalog = catalog
        self.runtime = runtime  # the configuration it was opened with (it keeps it: runtime.Reader)
        self.engine = engine  # that configuration's engine
        self.turns: set[Turn] = set()  # its running turn and those waiting for theirs
        self.loading = False  # a session/load is replacing it
        self.file_id = sid  # the id its file is saved under (another one after a conflicting writer)
        self.title: str | None = None  # set by the first turn (or the file, or a fork); kept through compactions
        self.title_sent: str | None = None  # the title the client was last told (session_info_update)
        self.mcp: McpSet | None = None  # its MCP servers, when mcp.enabled
        self.unsaved: str | None = None  # why its last save failed (it is kept in memory meanwhile)
        self.news = News()  # what its user must hear outside the conversation (a failed save, …)

    @property
    def cwd(self) -> str:
        return self.conv.workspace.cwd

    @property
    def workspace(self) -> Workspace:
        return self.conv.workspace

    @property
    def busy(self) -> bool:
        return bool(self.turns) or self.loading

    def cancel_all(self, reason: str | None = None) -> None:
        for turn in list(self.turns):
            turn.cancel_now(reason)

    def end(self) -> None:
        """The session is forgotten: its turns are cancelled, its sandbox ends (its folder goes), what its
        commands left running on purpose (bg-jobs, setsid) and its MCP servers end, off the
        caller's thread."""
        self.cancel_all()
        if self.conv.checkpoints is not None:
            self.conv.checkpoints.close()
        if self.conv.sandbox is not None:
            self.conv.sandbox.end()
        children = loaded("bob_acp.processes.children")
        if self.conv.owner and children is not None:
            _off_thread(children.end_orphans, "bob-session-orphans", self.conv.owner)
        if self.mcp is not None:
            _off_thread(self.mcp.close, "bob-mcp-close")


def _off_thread(work: Callable[..., object], name: str, *args: object) -> None:
    """`work(*args)` on a thread of its own; where none can be started, now."""
    from bob_acp import threads

    try:
        threads.start(work, name, *args)
    except threads.ThreadLimit:
        work(*args)
