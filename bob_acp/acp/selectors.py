"""With acp.configOptions: a session's model and approval-mode selectors (configOptions, and the
same mode as ACP modes for older clients), session/set_config_option and session/set_mode."""

from __future__ import annotations

from typing import Any

from bob_acp.acp.session import Session
from bob_acp.jsonrpc.errors import RpcError

MODES = (
    ("ask", "Ask", "Ask before every tool call that touches the machine"),
    ("allow-edits", "Allow edits", "Read and edit files without asking; bash still asks"),
    ("allow-all", "Allow all", "Run every tool call without asking"),
)


class Handlers:
    def __init__(self, server: Any):
        self.server = server

    def models(self) -> list[str]:
        model = self.server.cfg.model
        return [model.name] + [name for name in model.choices if name != model.name]

    def options(self, session: Session) -> list[dict]:
        conv = session.conv
        return [
            {"id": "model", "name": "Model", "category": "model", "type": "select",
             "currentValue": conv.model or self.server.cfg.model.name,
             "options": [{"value": name, "name": name} for name in self.models()]},
            {"id": "mode", "name": "Approval mode", "category": "mode", "type": "select",
             "currentValue": conv.mode,
             "options": [{"value": mode, "name": name, "description": text} for mode, name, text in MODES]},
        ]

    def state(self, session: Session) -> dict:
        return {"configOptions": self.options(session),
                "modes": {"currentModeId": session.conv.mode,
                          "availableModes": [{"id": mode, "name": name, "description": text}
                                             for mode, name, text in MODES]}}

    def restore(self, session: Session, choices: dict) -> None:
        """The choices a session file kept (a model no longer offered falls back to model.name)."""
        if choices.get("model") in self.models():
            session.conv.model = None if choices["model"] == self.server.cfg.model.name else choices["model"]
        if choices.get("mode") in {mode for mode, _, _ in MODES}:
            session.conv.mode = choices["mode"]

    def set_config_option(self, params: dict) -> dict:
        session = self.server.session(params)
        config_id, value = params.get("configId"), params.get("value")
        if config_id == "model":
            self._set_model(session, value)
        elif config_id == "mode":
            self._set_mode(session, value, "value")
        else:
            raise RpcError.invalid_params(f"configId: unknown option {str(config_id)[:100]!r} (model, mode)")
        return {"configOptions": self.options(session)}

    def set_mode(self, params: dict) -> dict:
        session = self.server.session(params)
        self._set_mode(session, params.get("modeId"), "modeId")
        return {}

    def _set_model(self, session: Session, value: Any) -> None:
        if value not in self.models():
            raise RpcError.invalid_params(f"value: not a model this agent offers: {str(value)[:100]!r}")
        chosen = None if value == self.server.cfg.model.name else value
        if chosen != session.conv.model:
            session.conv.model = chosen
            self._changed(session, mode=False)

    def _set_mode(self, session: Session, value: Any, field: str) -> None:
        if value not in {mode for mode, _, _ in MODES}:
            raise RpcError.invalid_params(f"{field}: unknown mode {str(value)[:100]!r} (ask, allow-edits, allow-all)")
        if value != session.conv.mode:
            session.conv.mode = value
            self._changed(session, mode=True)

    def _changed(self, session: Session, mode: bool) -> None:
        self.server.log.info(f"[acp] session {session.id}: model {session.conv.model or self.server.cfg.model.name}, "
                             f"mode {session.conv.mode}")
        self.server.update(session.id, {"sessionUpdate": "config_option_update", "configOptions": self.options(session)})
        if mode:
            self.server.update(session.id, {"sessionUpdate": "current_mode_update", "currentModeId": session.conv.mode})
        self.server.save(session)
