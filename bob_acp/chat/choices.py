"""What the chat offers beyond prompts, each through the protocol as an editor would: the saved
sessions of the folder (`session/list`, then `session/load` to see the conversation again), and
the session's model and approval mode (its `configOptions`, `session/set_config_option`)."""

from __future__ import annotations

from typing import Any, Protocol

from bob_acp import visible
from bob_acp.chat.ask import Asker
from bob_acp.chat.render import Screen


class ChatPort(Protocol):
    """What the choices use of the chat (bob_acp.chat.Chat)."""

    cwd: str
    session_id: str
    screen: Screen
    asker: Asker

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]: ...
    def error(self, message: str) -> Exception: ...

NEEDS_HISTORY = ("the saved sessions need sessions: {enabled: true} and acp: {sessionHistory: true} in Bob's "
                 "config (or --profile full)")
NEEDS_OPTIONS = "the model and mode pickers need acp: {configOptions: true} in Bob's config (or --profile full)"


class Choices:
    def __init__(self, chat: ChatPort):
        self.chat = chat
        self.options: list[dict[str, Any]] = []  # the session's configOptions, as last answered

    def take(self, result: dict[str, Any]) -> None:
        options = result.get("configOptions")
        if isinstance(options, list):
            self.options = [o for o in options if isinstance(o, dict)]

    # ---- sessions -----------------------------------------------------------------------------

    def sessions(self) -> list[dict[str, Any]]:
        """The saved sessions of the folder, newest first (an error in words when there are none to list)."""
        response = self.chat.call("session/list", {"cwd": self.chat.cwd})
        if "error" in response:
            if response["error"].get("code") == -32601:
                raise self.chat.error(NEEDS_HISTORY)
            raise self.chat.error(f"cannot list the sessions: {response['error'].get('message', '')}")
        found = response.get("result", {}).get("sessions")
        return [s for s in found if isinstance(s, dict)] if isinstance(found, list) else []

    def show_sessions(self) -> list[dict[str, Any]]:
        found = self.sessions()
        screen = self.chat.screen
        if not found:
            screen.line("no saved sessions in this folder", "dim")
        for number, item in enumerate(found, 1):
            when = str(item.get("updatedAt", ""))[:16].replace("T", " ")
            title = visible.line(str(item.get("title") or "(untitled)"))
            screen.line(f"  {number:>2}. {when}  {title}  {self.chat.screen.paint(visible.line(str(item.get('sessionId'))), 'dim')}")
        return found

    def pick(self, latest: bool) -> dict[str, Any]:
        """The listed session to go on with (its id and further folders): the latest, or the one
        the person picks."""
        if latest:
            found = self.sessions()
            if not found:
                raise self.chat.error("no saved session in this folder to continue")
            return found[0]
        found = self.show_sessions()
        if not found:
            raise self.chat.error("no saved session in this folder to resume")
        answer = self.chat.asker.line(f"which one (1-{len(found)})? ")
        if answer.isdigit() and 1 <= int(answer) <= len(found):
            return found[int(answer) - 1]
        raise self.chat.error("no session picked")

    # ---- the model and the mode -------------------------------------------------------------------

    def option(self, option_id: str) -> dict[str, Any]:
        for option in self.options:
            if option.get("id") == option_id:
                return option
        raise self.chat.error(NEEDS_OPTIONS)

    def show_or_set(self, option_id: str, value: str) -> None:
        option = self.option(option_id)
        values = [str(o.get("value")) for o in option.get("options") or [] if isinstance(o, dict)]
        screen = self.chat.screen
        if not value:
            current = str(option.get("currentValue"))
            screen.line(f"{option.get('name', option_id)}: {visible.line(current)}")
            screen.line("  choices: " + ", ".join(visible.line(v) for v in values), "dim")
            return
        if value not in values:
            raise self.chat.error(f"{value!r} is not one of: {', '.join(values)}")
        response = self.chat.call("session/set_config_option", {"sessionId": self.chat.session_id,
                                                                "configId": option_id, "value": value})
        if "error" in response:
            raise self.chat.error(f"cannot set {option_id}: {response['error'].get('message', '')}")
        self.take(response.get("result") or {})
        screen.line(f"{option.get('name', option_id)}: {visible.line(value)}", "dim")
