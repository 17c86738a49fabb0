"""The chat as an ACP client of its agent: requests and the events between them (updates,
permission questions, forms, the lines that steer a turn), a session opened, loaded or renewed,
and the words of the chat's commands and errors."""

from __future__ import annotations

import queue
import select
import time

from bob_acp import visible
from bob_acp.chat.agent import Agent
from bob_acp.chat.ask import Asker, Typing, typed_text
from bob_acp.chat.choices import Choices
from bob_acp.chat.render import Screen
from bob_acp.jsonrpc.endpoint import PeerError, Sent
from bob_acp.jsonrpc.errors import AUTH_REQUIRED
from bob_acp.jsontext import mapping

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TextIO

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_CANCELLED = 0, 1, 2, 130
SPIN_EVERY = 0.1
UNSENT_WAIT = 10.0  # seconds an agent whose input closed under a request is given to end
STEER_WAIT = 30.0  # seconds the end of a turn waits for the answers to the lines that steered it
CHAT_COMMANDS = ("/quit", "/exit", "/help", "/new", "/sessions", "/model", "/mode")  # the chat's own
STOP_WORDS = {
    "cancelled": "(cancelled)",
    "refusal": "(no model is configured: see the message above)",
    "max_turn_requests": "(stopped: this turn made as many model calls as limits.maxModelCalls allows)",
}
KEYS = ("keys: Enter sends · Up/Down recall earlier prompts · Ctrl-C cancels a running turn, "
        "clears the line at the prompt (twice: quit) · Ctrl-D quits")

class Quit(Exception):
    """The person asked to leave (a second Ctrl-C)."""


class ChatError(Exception):
    """Something the person is told in one line; the chat ends with status 1."""


class Said(Exception):
    """Something the person is told in one line; the chat goes on."""


class Chat:
    QUIT_WINDOW = 2.0  # seconds after a Ctrl-C that cancelled a turn in which a second one quits

    def __init__(self, agent: Agent, screen: Screen, asker: Asker, cwd: str):
        self.agent = agent
        self.screen = screen
        self.asker = asker
        self.cwd = cwd
        self.session_id = ""
        self.commands: list[dict[str, Any]] = []
        self.failed = False
        self._last_message = None
        self.last_interrupt = 0.0  # when a Ctrl-C last cancelled a turn
        self.mcp_servers: list[dict[str, Any]] = []  # chat.mcpServers of Bob's config
        self.skipped: list[str] = []  # the calls rejected because there was no terminal to ask on
        self.choices = Choices(self)
        self.typed: TextIO | None = None  # the terminal the person types prompts on (None: not one)
        self.steering = False  # the agent takes a line typed during a turn into it (_session/steering)
        self.typed_ahead: list[str] = []  # lines typed during a turn that could not join it: the next prompts
        self._steers: dict[Sent, str] = {}
        self.no_session = ""  # why no session could be opened yet (no usable model), or ""
        self.typing = Typing(None)  # (the terminal's echo, off while a turn runs: set with `typed`)
        self._retried = False  # a model call of this turn was retried (the hint about /new said once)
        self.can_list = False  # the agent lists saved sessions (session/list): /sessions works

    @staticmethod
    def error(message: str) -> Said:
        return Said(message)

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A request whose answer arrives with updates and permission requests in between.
        A Ctrl-C during a prompt cancels it (wherever it lands); a second one quits."""
        pending = self.agent.request(method, params)
        since = time.monotonic()
        interrupted = False
        while True:
            try:
                if method == "session/prompt":
                    self._take_typed()
                try:
                    event = self.agent.events.get(timeout=SPIN_EVERY)
                except queue.Empty:
                    self._idle(since, method)
                    continue
                since = time.monotonic()
                response, cancelled = self._handle(event, pending)
            except KeyboardInterrupt:
                if interrupted or method != "session/prompt":
                    raise Quit() from None
                interrupted = True
                self.cancel()
                continue
            interrupted = interrupted or cancelled
            if response is not None:
                return response

    def _handle(self, event: tuple[Any, ...], pending: Sent | None) -> tuple[dict[str, Any] | None, bool]:
        """(the response, when this event is its answer; whether the person cancelled at a question)."""
        kind = event[0]
        if kind == "end":
            self.agent.events.put(event)  # the end stays for whoever waits next
            words = [visible.line(line) for line in self.agent.last_words()]
            said = ("; it said: " + " / ".join(words)) if words else ""
            raise ChatError(f"bob-acp ended unexpectedly{said}")
        if kind == "update":
            self._update(mapping(event[1].get("update")))
        elif kind == "retry":
            self._retry(event[1])
        elif kind == "question":
            return None, self._permission(event[1], event[2])
        elif kind == "form":
            return None, self._form(event[1], event[2])
        elif kind == "answer" and event[1] in self._steers:
            self._steered(event[1])
        elif kind == "answer" and event[1] is pending:
            self.screen.clear_spinner()
            if pending.cancelled():
                return self._handle(("end", None), pending)
            try:
                return {"result": pending.result()}, False
            except PeerError as exc:
                if pending.unsent and self.agent.ended(UNSENT_WAIT):  # (it ended before reading: say why)
                    return self._handle(("end", None), pending)
                return {"error": exc.error if isinstance(exc.error, dict) else {"message": str(exc.error)}}, False
        return None, False

    def _take_typed(self) -> None:
        """A line the person typed while the turn runs: shown as theirs (the terminal does not
        echo it into the agent's output), and it steers the turn where the agent offers that;
        elsewhere, or for a command, it is the next prompt."""
        if self.typed is None:
            return
        try:
            if not select.select([self.typed], [], [], 0)[0]:
                return
        except (OSError, ValueError):
            return
        line = self.typed.readline()
        if not line:
            return
        text = typed_text(line.rstrip("\n"))
        if not text.strip():
            return
        self.screen.end_stream()
        if not self.steering or self._is_command(text):  # run as typed once the turn ends
            self.typed_ahead.append(text)
            what = "runs" if self._is_command(text) else "is the next prompt"
            self.screen.line(f"↳ you: {visible.line(text.strip())} ({what} when the turn ends)", "dim")
            return
        # (promptRequired when idle: a line that comes as the turn ends is the chat's next prompt;
        # either way _steered shows it, as the person's, once the agent answers)
        sent = self.agent.request("_session/steering", {"sessionId": self.session_id,
                                                        "prompt": [{"type": "text", "text": text}],
                                                        "_meta": {"steering": {"idleBehavior": "promptRequired"}}})
        self._steers[sent] = text

    def _is_command(self, text: str) -> bool:
        word = text.strip().split(" ", 1)[0]
        return word in CHAT_COMMANDS or (word.startswith("/") and word[1:] in {
            str(c.get("name")) for c in self.commands if isinstance(c, dict)})

    def _settle_steers(self) -> None:
        """The turn has answered: the lines sent to steer it are answered too (the agent answers
        them at once), so one that came too late is the next prompt, before anything typed later."""
        deadline = time.monotonic() + STEER_WAIT
        while self._steers and time.monotonic() < deadline:
            try:
                event = self.agent.events.get(timeout=SPIN_EVERY)
            except queue.Empty:
                continue
            self._handle(event, None)
        for text in self._steers.values():  # (no answer: kept, never lost)
            self.typed_ahead.append(text)
        self._steers.clear()

    def _steered(self, sent: Sent) -> None:
        text = self._steers.pop(sent)
        try:
            outcome = mapping(sent.result()).get("outcome")
        except PeerError as exc:
            error = exc.error if isinstance(exc.error, dict) else {"message": str(exc.error)}
            self.screen.end_stream()
            self.screen.line(f"not added to the turn: {_error_line(error)}", "yellow")
            return
        self.screen.end_stream()
        if outcome == "injected":
            self.screen.line(f"↳ added to the running turn (the model reads it next): {visible.line(text)}", "cyan")
        else:  # the turn was ending: the line is the next prompt
            self.typed_ahead.append(text)
            self.screen.line(f"↳ the turn was ending: sent as the next prompt: {visible.line(text)}", "dim")

    def drain(self) -> None:
        """Take in what the agent sent between requests (the commands update after session/new)."""
        while True:
            try:
                event = self.agent.events.get_nowait()
            except queue.Empty:
                return
            if event[0] == "end":
                self.agent.events.put(event)  # the end stays for the next request to see
                return
            self._handle(event, None)

    def cancel(self) -> None:
        self.last_interrupt = time.monotonic()
        self.screen.line("^C cancelling the turn (Ctrl-C again to quit)", "yellow")
        self.agent.notify("session/cancel", {"sessionId": self.session_id})

    def _idle(self, since: float, method: str) -> None:
        if method == "session/prompt" and time.monotonic() - since > 0.3:
            self.screen.spin(since)

    def _retry(self, params: dict[str, Any]) -> None:
        """A model call Bob retries (its `_bob/retry` notification): why, and when."""
        reason = visible.line(str(params.get("reason", "")))
        delay = params.get("delay")
        when = f" in {delay:.1f} s" if isinstance(delay, (int, float)) else ""
        self.screen.clear_spinner()
        self.screen.line(f"↻ {reason}; retry {visible.line(str(params.get('attempt', '?')))}{when}", "yellow")
        if not self._retried and self.typed is not None:
            self._retried = True  # (once a turn: a session keeps the configuration it started with)
            self.screen.line("  this session keeps the model settings it started with: fixed Bob's configuration "
                             "meanwhile? Ctrl-C, then /new opens a session that uses it", "dim")

    def _update(self, update: dict[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        if kind == "available_commands_update":
            self.commands = update.get("availableCommands") or []
            return
        if kind == "current_mode_update":
            self.screen.end_stream()
            mode = update.get("currentModeId")
            if mode == "ask":
                self.screen.line("approval mode: ask", "dim")
            self.show_mode(mode)
            return
        message = update.get("messageId")
        if kind in ("agent_message_chunk", "agent_thought_chunk") and message != self._last_message:
            self.screen.end_stream()  # a new message starts on its own line
        self._last_message = message
        self.screen.update(update)

    def _permission(self, params: dict[str, Any], answer: queue.Queue[Any]) -> bool:
        """Answer a permission request; True when the person pressed Ctrl-C (the turn is cancelled)."""
        with self.typing.shown():  # (the answer is typed, and seen, as usual)
            return self._ask_permission(params, answer)

    def _ask_permission(self, params: dict[str, Any], answer: queue.Queue[Any]) -> bool:
        call = params.get("toolCall", {})
        title = visible.line(str(call.get("title", "a tool")))
        offered = [o for o in params.get("options", []) if isinstance(o, dict)]
        project = next((str(o.get("name", "")) for o in offered if o.get("optionId") == "allow_project"), None)
        offered = [o for o in offered if o.get("optionId") not in ("allow_project", "reject_project")]
        options = {o.get("kind"): o.get("optionId") for o in offered}
        always = next((o.get("name", "") for o in offered if o.get("kind") == "allow_always"), None)
        scope = None if always is None else (
            visible.line(always.replace("Always allow ", "").replace(" in this session", "")) or "this tool")
        if project is not None:  # (permissions.projectRules: what a rule for the project would cover)
            project = visible.line(project.replace("Always allow ", "").replace(" in this project", ""))
        self.screen.end_stream()
        self.screen.clear_spinner()
        for item in call.get("content") or []:  # the proposed change, before the answer
            if item.get("type") == "diff":
                change = (item.get("oldText"), item.get("newText", ""), item.get("path", ""))
                self.screen.shown_diffs[call.get("toolCallId")] = change
                self.screen.write(self.screen.diff(*change))
        if not self.asker.can_ask:
            self.screen.line(f"  rejected {title}: there is no terminal to ask on (--yes allows every call)", "yellow")
            self.skipped.append(title)
        choice, reason = self.asker.ask(title, scope, self.screen.paint, project)
        if self.asker.yes:
            self.screen.line(f"  allowed (--yes): {title}", "dim")
        if choice == "cancelled":  # as ACP has it: the turn's cancel, then the pending question answered
            self.cancel()
            answer.put({"outcome": {"outcome": "cancelled"}})
            return True
        # (allow_project and reject_project are the options' own ids: no kind names them alone)
        kind = {"allow": "allow_once", "allow_always": "allow_always", "reject": "reject_once"}.get(choice)
        result: dict[str, Any] = {"outcome": {"outcome": "selected", "optionId": options.get(kind, choice)}}
        if choice == "reject" and reason:  # what to do instead: Bob gives it to the model with the rejection
            result["_meta"] = {"bob": {"reason": reason}}
        answer.put(result)
        return False

    def _form(self, params: dict[str, Any], answer: queue.Queue[Any]) -> bool:
        """The agent's question (elicitation/create, a form): each field asked on the terminal,
        a choice by its number; Enter leaves a field out (a required one: the form is declined),
        Ctrl-C cancels the turn. True when the person pressed Ctrl-C."""
        with self.typing.shown():
            return self._ask_form(params, answer)

    def _ask_form(self, params: dict[str, Any], answer: queue.Queue[Any]) -> bool:
        self.screen.end_stream()
        self.screen.clear_spinner()
        schema = mapping(params.get("requestedSchema"))
        fields = mapping(schema.get("properties"))
        asked_for = schema.get("required")
        required: list[Any] = asked_for if isinstance(asked_for, list) else []
        no_one = not self.asker.can_ask or self.asker.yes or self.asker.no  # (--yes and --no answer permissions only)
        if no_one or params.get("mode") != "form" or not fields:
            why = "there is no terminal to ask on" if no_one else "it is not a form"
            self.screen.line(f"  not answered ({why}): {visible.line(str(params.get('message', '')))}", "yellow")
            answer.put({"action": "decline"})
            return False
        self.screen.line(f"? {visible.line(str(params.get('message', '')))}", "yellow")
        content: dict[str, Any] = {}
        for name, field in fields.items():
            field = mapping(field)
            title = visible.line(str(field.get("title") or name))
            choices = [str(c) for c in field.get("enum") or [] if isinstance(c, str)]
            for number, choice in enumerate(choices, 1):
                self.screen.line(f"  {number}. {visible.line(choice)}")
            hint = f" [1-{len(choices)}, or Enter not to answer]" if choices else ""
            while True:
                try:
                    reply = self.asker.line(f"  {title}{hint}: ", interrupt=True)
                except KeyboardInterrupt:  # as at a permission question: the turn is cancelled
                    self.cancel()
                    answer.put({"action": "cancel"})
                    return True
                if choices and reply.isdigit() and 1 <= int(reply) <= len(choices):
                    reply = choices[int(reply) - 1]
                if not choices or not reply or reply in choices:
                    break
            if reply:
                content[name] = reply
            elif name in required:
                self.screen.line("  not answered", "dim")
                answer.put({"action": "decline"})
                return False
        answer.put({"action": "accept", "content": content})
        return False

    def start(self, load: str | None, resume: bool = False, latest: bool = False) -> None:
        # (`_meta.bob.retries`: Bob tells this client of each model-call retry, to show it)
        init = self.call("initialize", {"protocolVersion": 1, "clientCapabilities": {
            "_meta": {"bob": {"retries": True}}, "elicitation": {"form": {}}},
                                        "clientInfo": {"name": "bob-acp-chat", "version": "1"}})
        _result(init, "bob-acp did not start")
        self.steering = mapping(mapping(mapping(init.get("result")).get("_meta")).get("steering")).get("supported") is True
        capabilities = mapping(mapping(init.get("result")).get("agentCapabilities"))
        self.can_list = "list" in mapping(capabilities.get("sessionCapabilities"))
        params: dict[str, Any] = {"cwd": self.cwd, "mcpServers": self.mcp_servers}
        if resume or latest:
            try:
                picked = self.choices.pick(latest)
            except Said as exc:
                raise ChatError(str(exc)) from None
            load = str(picked.get("sessionId"))
            more = picked.get("additionalDirectories")
            if isinstance(more, list) and more and self._give_back(more):
                params["additionalDirectories"] = more
        if load:
            self.screen.line(f"Loaded session {load}:", "bold")
            response = self.call("session/load", {"sessionId": load, **params})
            self.screen.end_stream()
            result = _result(response, f"cannot load session {load}")
            self.session_id = load
        else:
            response = self.call("session/new", {"cwd": self.cwd, "mcpServers": self.mcp_servers})
            if self.typed is not None and mapping(response.get("error")).get("code") == AUTH_REQUIRED:
                # No usable model (none set up, or a broken configuration): the chat waits for
                # the fix, and the next prompt or /new opens the session with it.
                self.no_session = _error_line(response["error"])
                return
            result = _result(response, f"cannot open a session in {self.cwd}")
            self.session_id = result["sessionId"]
        self.choices.take(result)
        modes = mapping(result.get("modes"))
        self.show_mode(modes.get("currentModeId"))

    def _give_back(self, folders: list[Any]) -> bool:
        """Whether the person gives a saved session its further folders again: a session file
        is only a file (a cloned repository can ship one), so folders the person did not give
        in this run are asked about, and without a terminal to ask on, not given."""
        shown = ", ".join(visible.line(str(folder)) for folder in folders)
        if not self.asker.can_ask or self.asker.yes or self.asker.no:
            self.screen.line(f"the saved session also covered {shown}: not given again (no one to ask here); "
                             "it goes on in its own folder alone", "yellow")
            return False
        answer = self.asker.line(f"The saved session also covered {shown}. Give it those folders again? [y/N] ")
        if answer.lower() in ("y", "yes"):
            return True
        self.screen.line("it goes on in its own folder alone", "dim")
        return False

    def show_mode(self, mode: object) -> None:
        """A session that asks less than `ask` always says so on screen."""
        if isinstance(mode, str) and mode != "ask":
            what = {"allow-edits": "file edits in this project run",
                    "sandboxed": "commands in the sandbox and file edits in this project run"}.get(mode, "tool calls run")
            self.screen.line(f"approval mode: {visible.line(mode)} ({what} without asking)", "yellow")

    def turn(self, text: str) -> str:
        """One prompt; its stop reason, or "error"."""
        self._last_message = None
        self._retried = False
        self.typing.hide()
        try:
            response = self.call("session/prompt", {"sessionId": self.session_id,
                                                    "prompt": [{"type": "text", "text": text}]})
            self._settle_steers()
        finally:
            self.typing.show()
        self.screen.end_stream()
        if "error" in response:
            self.failed = True
            self.screen.line(f"error: {_error_line(response['error'])}", "red")
            if self.typed is not None:
                self.screen.line("  (fixed Bob's configuration meanwhile? /new opens a session that uses it)", "dim")
            return "error"
        stop = response["result"]["stopReason"]
        if stop in STOP_WORDS:
            self.screen.line(STOP_WORDS[stop], "yellow" if stop != "cancelled" else "dim")
        self.screen.usage_line()
        return stop

    def new_session(self) -> None:
        """/new: a session of its own, opened with Bob's configuration as it is now (a fix of a
        broken file counts from here); the one before stays saved where sessions are kept. Said
        (the chat goes on) when Bob still has no usable model."""
        response = self.call("session/new", {"cwd": self.cwd, "mcpServers": self.mcp_servers})
        if mapping(response.get("error")).get("code") == AUTH_REQUIRED:
            self.no_session = _error_line(response["error"])
            raise Said(f"no session yet: {self.no_session}")
        result = _result(response, f"cannot open a session in {self.cwd}")
        self.no_session = ""
        self.session_id = result["sessionId"]
        self.choices.take(result)
        self.drain()
        self.screen.line(f"🆕 New session {self.session_id}, with the configuration as it is now.", "dim")

    def unknown_command(self, word: str) -> str | None:
        """What to say of `/word` when it is no command here (a typo must not become a prompt, nor
        a session's title); None for a known one, or for text that only starts with a slash (a
        path such as /etc/hosts goes to the model)."""
        if not word.startswith("/") or len(word) < 2 or "/" in word[1:] or "." in word:
            return None
        name = word[1:]
        known = {str(c.get("name", "")) for c in self.commands} | {"help", "sessions", "model", "mode", "quit",
                                                                   "exit", "new"}
        if name in known:
            return None
        listed = ", ".join(f"/{n}" for n in sorted(known - {"exit"}))
        return f"unknown command {visible.line(word)}: the commands are {listed} (/help says what each does)"

    def help_text(self) -> str:
        """The commands that work here: the chat's own that this agent's profile offers, then the
        agent's (as it listed them)."""
        offered = {option.get("id") for option in self.choices.options}
        own = ["/help (this list)", "/new (a new session, with the configuration as it is now)"]
        if self.can_list:
            own.append("/sessions (the saved ones here)")
        own += [f"/{name} [{name.upper()}] (show or change)" for name in ("model", "mode") if name in offered]
        lines = ["commands of this chat: " + ", ".join(own + ["/quit (leave)"]),
                 "commands of the agent:" if self.commands else "the agent offers no commands of its own here"]
        lines += [f"  /{visible.line(str(c.get('name', ''))):<16} {visible.line(str(c.get('description', '')))}"
                  for c in self.commands]
        return "\n".join(lines + [KEYS])


def _result(response: dict[str, Any], what: str) -> dict[str, Any]:
    if "error" in response:
        raise ChatError(f"{what}: {_error_line(response['error'])}")
    return response["result"]


def _error_line(error: dict[str, Any]) -> str:
    """An error in words: the one-line reason Bob gave, without the protocol's prefixes."""
    return visible.line(_error_words(error))


def _error_words(error: dict[str, Any]) -> str:
    data = mapping(error.get("data"))
    if data.get("error"):
        return str(data["error"])
    message = str(error.get("message", "unknown error"))
    if error.get("code") == -32601 and "session/load" in message:
        return "this Bob keeps no sessions (set sessions: {enabled: true} in its config to use --load)"
    for prefix in ("Invalid params: ", "Invalid request: ", "Internal error: ", "Authentication required: "):
        message = message.removeprefix(prefix)
    return message
