"""Modules imported on first use: answering `initialize` must not wait for the engine's imports."""

from __future__ import annotations

import importlib
import sys
import threading
from types import ModuleType

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable


class LazyModule:
    """Stands for a module until an attribute is read, then is that module's attribute.

    Given the namespace that holds it (`globals()`) and its name there, the first load puts the
    module itself in its place, so later uses are plain attribute lookups on the module (the
    proxy's `__getattr__` on every use cost a Python call on each request's path)."""

    _loading = threading.RLock()  # (the class's: one first load at a time among all of them)

    def __init__(self, name: str, namespace: dict[str, Any] | None = None, alias: str | None = None):
        self._name = name
        self._module: ModuleType | None = None
        self._namespace = namespace
        self._alias = alias

    def load(self) -> ModuleType:
        if self._module is None:
            # One first load at a time: the warm-up thread and the dispatcher importing two of
            # Bob's modules that import each other's parts can meet in the import system's
            # per-module locks, which then raises _DeadlockError (seen once as an Internal error
            # on a session/new right after initialize).
            with LazyModule._loading:
                if self._module is None:
                    module = importlib.import_module(self._name)
                    if self._namespace is not None and self._alias and self._namespace.get(self._alias) is self:
                        self._namespace[self._alias] = module
                    self._module = module
        return self._module

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(attr)
        return getattr(self.load(), attr)


def loaded(name: str) -> ModuleType | None:
    """The module once its import has finished, else None, never waiting: at the end of the
    process an import still running (the warm-up's) holds its lock, and nothing of a module not
    yet imported has run."""
    module = sys.modules.get(name)
    if module is None or getattr(getattr(module, "__spec__", None), "_initializing", False):
        return None
    return module


def warm(*modules: LazyModule | Callable[[], Any]) -> None:
    """Import these (or run these loaders) on a background thread, after start-up, so the first
    real use is quick."""
    def run() -> None:
        from bob_acp import log

        for module in modules:
            try:
                if isinstance(module, LazyModule):
                    module.load()
                elif not isinstance(module, ModuleType):  # a module already in its place is loaded
                    module()
            except Exception as exc:  # the real use raises it again, where it can be answered
                log.get("bob").debug(f"warm-up: {getattr(module, '_name', module)!r} failed: {exc!r}")
        log.get("bob").debug("warm-up done")

    try:
        threading.Thread(target=run, name="bob-warm-up", daemon=True).start()
    except RuntimeError:  # (a machine's thread limit: each module loads at its first use instead)
        pass
