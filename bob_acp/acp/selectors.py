"""With acp.configOptions: a session's model and approval-mode selectors (configOptions, and the
same mode as ACP modes for older clients), session/set_config_option and session/set_mode."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bob_acp.acp.channel import ClientChannel
from bob_acp.acp.session import Session
from bob_acp.acp.table import SessionTable
from bob_acp.acp.updates import say_news
from bob_acp.config import Config
from bob_acp.files.workspace import too_broad
from bob_acp.jsonrpc.errors import RpcError
from bob_acp.providers.models import ModelSet
from bob_acp.sandbox import policy

if TYPE_CHECKING:
    from bob_acp.log import Logger


MODES = (
    ("ask", "Ask", "Ask before every tool call that touches the machine"),
    ("sandboxed", "Sandboxed", "Run commands in the sandbox and edit this project's files without asking; "
                               "anything else still asks"),
    ("allow-edits", "Allow edits", "Read and edit this project's files without asking (not .git or .bob); "
                                   "everything else still asks"),
    ("allow-all", "Allow all", "Run every tool call without asking"),
)
LEVEL_NAMES = {"default": "As configured", "off": "Off", "low": "Low", "medium": "Medium", "high": "High"}
NETWORK = "sandboxNetwork"  # the on/off option of the sandbox's network
RANK = {"ask": 0, "sandboxed": 1, "allow-edits": 1, "allow-all": 2}  # how much less a mode asks


class Handlers:
    def __init__(self, cfg: Config, log: Logger, table: SessionTable, channel: ClientChannel):
        self.cfg = cfg  # the connection's; a session's own is session.runtime.cfg
        self.log = log
        self.table = table
        self.channel = channel

    @staticmethod
    def _models(session: Session) -> ModelSet:
        return session.engine.models

    def models(self, session: Session) -> list[str]:
        """The values the model selector offers: every configured model by its id, then the
        further names each serves (choices)."""
        return [option.value for option in self._models(session).options()]

    def modes(self, session: Session) -> tuple[Any, ...]:
        """The approval modes this session can have (engine.unoffered_modes says which it cannot:
        sandboxed without a sandbox that holds here, neither it nor allow-edits over a folder as
        broad as the home folder); sandboxed says what its sandbox covers on this machine."""
        conv = session.conv
        offered = []
        for mode, name, text in MODES:
            if mode in conv.unoffered:
                continue
            if mode == "sandboxed" and conv.sandbox is not None:
                covers = conv.sandbox.coverage.held
                lacks = conv.sandbox.partial()
                text = (f"{text}. The sandbox here: {'; '.join(covers)}" + (f". It lacks: {lacks}" if lacks else ""))
            offered.append((mode, name, text))
        return tuple(offered)

    def levels(self, session: Session) -> tuple[str, ...]:
        """The reasoning levels the session's model takes (none for the script provider)."""
        return reasoning_levels(self._models(session).pick(session.conv.model).entry.settings.provider)

    def options(self, session: Session) -> list[dict[str, Any]]:
        conv = session.conv
        levels = self.levels(session)
        reasoning = [{"id": "reasoning", "name": "Reasoning", "category": "thought_level", "type": "select",
                      "currentValue": conv.reasoning or "default",
                      "options": [{"value": level, "name": LEVEL_NAMES.get(level, level)} for level in levels]}]
        return [
            {"id": "model", "name": "Model", "category": "model", "type": "select",
             "currentValue": self._models(session).pick(conv.model).value,
             "options": [{"value": name, "name": name} for name in self.models(session)]},
            {"id": "mode", "name": "Approval mode", "category": "mode", "type": "select",
             "currentValue": conv.mode,
             "options": [{"value": mode, "name": name, "description": text}
                         for mode, name, text in self.modes(session)]},
        ] + (reasoning if levels else []) + self._switches(session)

    def _switches(self, session: Session) -> list[dict[str, Any]]:
        """On/off options, to a client that shows them (`session.configOptions.boolean`): the
        sandbox's network for the session's commands, where it has a sandbox."""
        if not self.channel.capabilities.boolean_options or session.conv.sandbox is None:
            return []
        return [{"id": NETWORK, "name": "Sandbox network", "type": "boolean",
                 "currentValue": session.conv.sandbox.network,
                 "description": "Commands in the sandbox can reach the network (from the next command)"}]

    def state(self, session: Session) -> dict[str, Any]:
        return {"configOptions": self.options(session), "modes": modes_state(session.conv.mode, self.modes(session))}

    def restore(self, session: Session, choices: dict[str, Any]) -> str | None:
        """The choices a session file kept (a model no longer offered falls back to model.name).
        A saved approval mode is restored only when it asks at least as much as the configured
        permissions.mode (a session file can come with a cloned repository); otherwise the
        session starts in the configured mode, and the line returned says so."""
        if choices.get("model") in self.models(session):
            session.conv.model = self._chosen(session, choices["model"])
        if choices.get("reasoning") in self.levels(session):
            session.conv.reasoning = None if choices["reasoning"] == "default" else choices["reasoning"]
        if choices.get("network") == "off" and session.conv.sandbox is not None:  # (never "on": a file can come
            session.conv.sandbox.set_network(False)                               # with a cloned repository)
        saved = choices.get("mode")
        if not isinstance(saved, str) or saved not in {mode for mode, _, _ in self.modes(session)}:
            return None
        configured = session.runtime.cfg.permissions.mode
        if RANK[saved] <= RANK[configured]:
            session.conv.mode = saved
            return None
        session.conv.mode = configured
        self.log.info(f"[acp] session {session.id}: saved approval mode {saved} not restored "
                             f"(it asks less than permissions.mode {configured})")
        return (f"🔒 This session was saved in approval mode `{saved}`; it continues in `{configured}`, which asks "
                "before tool calls as configured. Choose another mode in the mode selector to change it.")

    def set_config_option(self, params: dict[str, Any]) -> dict[str, Any]:
        session = self.table.get(params)
        config_id, value = params.get("configId"), params.get("value")
        if config_id == "model":
            self._set_model(session, value)
        elif config_id == "mode":
            self._set_mode(session, value, "value")
        elif config_id == "reasoning" and self.levels(session):
            if not isinstance(value, str) or value not in self.levels(session):
                raise RpcError.invalid_params(f"value: not a reasoning level: {str(value)[:100]!r} "
                                              f"({', '.join(self.levels(session))})")
            chosen = None if value == "default" else value
            if chosen != session.conv.reasoning:
                session.conv.reasoning = chosen
                self._changed(session, mode=False)
        elif config_id == NETWORK and self._switches(session):
            self._set_network(session, params)
        else:
            known = ", ".join(o["id"] for o in self.options(session))
            raise RpcError.invalid_params(f"configId: unknown option {str(config_id)[:100]!r} ({known})")
        return {"configOptions": self.options(session)}

    def set_mode(self, params: dict[str, Any]) -> dict[str, Any]:
        session = self.table.get(params)
        self._set_mode(session, params.get("modeId"), "modeId")
        return {}

    def _set_model(self, session: Session, value: object) -> None:
        if not isinstance(value, str) or value not in self.models(session):
            raise RpcError.invalid_params(f"value: not a model this agent offers: {str(value)[:100]!r}")
        chosen = self._chosen(session, value)
        if chosen != session.conv.model:
            session.conv.model = chosen
            if session.conv.reasoning not in (None, *self.levels(session)):
                session.conv.reasoning = None  # a level the newly chosen model does not take
            self._changed(session, mode=False)

    def _chosen(self, session: Session, value: str) -> str | None:
        """What a session keeps for a model choice (None: the default, the first option)."""
        return None if value == self._models(session).options()[0].value else value

    def _set_mode(self, session: Session, value: object, field: str) -> None:
        why = session.conv.unoffered.get(value) if isinstance(value, str) else None
        if why is not None:
            raise RpcError.invalid_params(f"{field}: this session cannot have the mode {value}: {why}")
        if not isinstance(value, str) or value not in {mode for mode, _, _ in self.modes(session)}:
            offered = ", ".join(mode for mode, _, _ in self.modes(session))
            raise RpcError.invalid_params(f"{field}: unknown mode {str(value)[:100]!r} ({offered})")
        if value != session.conv.mode:
            session.conv.mode = value
            self._changed(session, mode=True)

    def _set_network(self, session: Session, params: dict[str, Any]) -> None:
        value = params.get("value")
        if params.get("type") != "boolean" or not isinstance(value, bool):
            raise RpcError.invalid_params(f"value: {NETWORK} is on or off: {{\"type\": \"boolean\", \"value\": true}}")
        conv = session.conv
        assert conv.sandbox is not None
        said = conv.sandbox.set_network(value)
        if not said:
            return
        conv.unoffered = policy.unoffered_modes(conv.sandbox, too_broad(conv.workspace))
        mode_changed = conv.mode in conv.unoffered
        if mode_changed:  # (the sandbox no longer holds what `sandboxed` promises here)
            said += f"; the approval mode is ask: {conv.unoffered[conv.mode]}"
            conv.mode = "ask"
        self.log.info(f"[acp] session {session.id}: the sandbox's network {said}")
        session.news.add((f"The sandbox's network is {said}.", None, "info"))
        say_news(self.channel, session)
        self._changed(session, mode=mode_changed)

    def _changed(self, session: Session, mode: bool) -> None:
        self.log.info(f"[acp] session {session.id}: model {self._models(session).pick(session.conv.model).value}, "
                             f"mode {session.conv.mode}")
        self.channel.update(session.id, {"sessionUpdate": "config_option_update", "configOptions": self.options(session)})
        if mode:
            self.channel.update(session.id, {"sessionUpdate": "current_mode_update", "currentModeId": session.conv.mode})
        self.table.save(session)


def reasoning_levels(provider: str) -> tuple[str, ...]:
    """The reasoning levels a provider takes (none for the script provider)."""
    if provider == "openai":
        from bob_acp.providers import openai
        return openai.REASONING_LEVELS
    if provider == "openai-responses":
        from bob_acp.providers import responses
        return responses.REASONING_LEVELS
    if provider == "anthropic":
        from bob_acp.providers import anthropic
        return anthropic.REASONING_LEVELS
    return ()


def modes_state(current: str, offered: tuple[Any, ...] = MODES) -> dict[str, Any]:
    """ACP's SessionModeState: the current approval mode and those there are."""
    return {"currentModeId": current,
            "availableModes": [{"id": mode, "name": name, "description": text} for mode, name, text in offered]}
