"""Modules imported on first use: answering `initialize` must not wait for the engine's imports."""

from __future__ import annotations

import importlib
import threading
from types import ModuleType

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing is not imported at start-up
    from typing import Any, Callable


class LazyModule:
    """Stands for a module until an attribute is read, then is that module's attribute."""

    def __init__(self, name: str):
        self._name = name
        self._module: ModuleType | None = None

    def load(self) -> ModuleType:
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return self._module

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(attr)
        return getattr(self.load(), attr)


def warm(*modules: LazyModule | Callable[[], Any]) -> None:
    """Import these (or run these loaders) on a background thread, after start-up, so the first
    real use is quick."""
    def run() -> None:
        for module in modules:
            try:
                module.load() if isinstance(module, LazyModule) else module()
            except Exception:  # the real use will raise it where it can be reported
                pass

    threading.Thread(target=run, name="bob-warm-up", daemon=True).start()
