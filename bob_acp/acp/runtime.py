"""What a configuration gives Bob to serve with: the config, its models, the secrets to redact,
the environment children start with, and the engine. Made at start-up from the config file, and
made again when that file has changed since (a newcomer who runs `bob-acp setup`, or fixes a
broken file, then opens a new session in the same Bob): sessions opened after the change use
the new one, sessions already open keep theirs.

What the connection advertised at `initialize` (its capabilities, the methods it answers:
`acp.*`, `sessions.*`, `mcp.*`) stays as it was at start-up; a change there takes a restart.
"""

from __future__ import annotations

import os
import threading

from bob_acp import config as config_module
from bob_acp import secrets, threads
from bob_acp.acp.lazy import LazyModule
from bob_acp.config import environment, keys
from bob_acp.exceptions import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    from bob_acp.config import Config
    from bob_acp.engine import Engine, Refs
    from bob_acp.log import Logger
    from bob_acp.providers.base import Provider
    from bob_acp.providers.models import ModelSet

engine_module = LazyModule("bob_acp.engine", globals(), "engine_module")


class Runtime:
    """One reading of the configuration, and what it gives."""

    def __init__(self, cfg: Config, problem: str | None, provider: Provider | ModelSet | None, no_model: str,
                 known: tuple[str, ...], child_env: dict[str, str], hidden: tuple[str, ...],
                 signature: tuple[Any, ...] | None):
        self.cfg = cfg
        self.problem = problem  # the config error this reading serves with the defaults, if any
        self.provider = provider
        self.no_model = no_model  # what a prompt answers when no model is usable
        self.known = known  # secret values to redact (keys, what headers read, dropped variables)
        self.child_env = child_env  # what tools and MCP servers start with (secrets dropped)
        self.hidden = hidden  # variables an editor's terminal must not pass on (the model's keys)
        self.signature = signature  # the config file as it was read (see file_signature)
        redactor = secrets.Redactor(known)
        self.redact: Callable[[Any], Any] | None = redactor.tree if redactor else None
        self._engine: Engine | None = None
        self._lock = threading.Lock()
        self.failure: ConfigError | None = None  # the error behind `problem`

    @property
    def usable(self) -> bool:
        """Whether a model can be used (with acp.auth: whether Bob is "signed in")."""
        default = getattr(self.provider, "default", None)  # (several models: a ModelSet)
        return self.provider is not None and (default is None or default.provider is not None)

    def engine(self, log: Logger, refs: Refs) -> Engine:
        """The engine of this reading (made at first use: its imports are not start-up's)."""
        if self._engine is None:
            with self._lock:
                if self._engine is None:
                    self._engine = engine_module.Engine(self.cfg, self.provider, self.no_model, log, refs,
                                                        self.child_env, self.redact)
        return self._engine


def file_signature(path: str) -> tuple[Any, ...] | None:
    """What says the file changed, whichever way it was changed: its device, inode,
    modification time, size and change time (None: no such file). The change time is the
    kernel's: a write in place whose modification time is put back (`touch -r`) moves it."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino, info.st_mtime_ns, info.st_size, info.st_ctime_ns


READ_WAIT = 2.0  # seconds a session/new waits for a changed config file to be read


class Reader:
    """Reads the configuration, at start-up and again whenever its file has changed. A reading
    runs on a thread of its own: a session/new waits for it a moment (READ_WAIT), a prompt never
    does, and a file that cannot be read at all (a FIFO, a file too large, an I/O error) leaves
    the last good reading in use, which new sessions are told."""

    def __init__(self, explicit: str | None, profile: str | None, env: dict[str, str], log: Logger):
        self.explicit = explicit
        self.profile = profile
        self.env = env  # Bob's environment as it started (secrets included: Bob's own use)
        self.log = log
        self.path = config_module.find_path(explicit, env)[0]
        self.current = self._read()
        self.unreadable: str | None = None  # why the file as it is now cannot be read (the last good one serves)
        self._tried = self.current.signature  # the file's signature last read (or tried)
        self._reading: threading.Event | None = None  # set once the reading under way is done
        self._lock = threading.Lock()

    def fresh(self, wait: bool = True) -> Runtime:
        """The current reading, the file read again (on a thread) when it changed since; `wait`:
        up to READ_WAIT seconds for that reading (a session opened after a fix gets the fix)."""
        with self._lock:
            signature = file_signature(self.path)
            if signature != self._tried and self._reading is None:
                self._tried = signature
                reading = self._reading = threading.Event()
                try:
                    threads.start(self._reread, "bob-config-read", reading)
                except threads.ThreadLimit:
                    self._reading = None
                    self._reread(reading)
            pending = self._reading
        if pending is not None and wait:
            pending.wait(READ_WAIT)
        return self.current

    def read_now(self) -> None:
        """Read the configuration again now, whether or not its file changed (a key file it
        names was removed), on this thread."""
        with self._lock:
            self._tried = file_signature(self.path)
        self._reread(threading.Event())

    def _reread(self, done: threading.Event) -> None:
        try:
            before = self.current
            runtime = self._read()
            if isinstance(runtime.failure, config_module.ConfigUnreadable) and not before.problem:
                self.unreadable = runtime.problem
                self.log.warning("[acp] {problem}: the configuration read before stays in use", problem=runtime.problem)
                return
            self.current, self.unreadable = runtime, None
            state = f"error: {runtime.problem}" if runtime.problem else "read again"
            self.log.info("[acp] the config file {path} changed: {state}", path=self.path, state=state)
            if before.problem and not runtime.problem:
                self.log.info("[acp] the configuration is usable again: new sessions use it")
        finally:
            with self._lock:
                self._reading = None
            done.set()

    def _read(self) -> Runtime:
        from bob_acp import log as logging_setup

        signature = file_signature(self.path)
        env = self.env
        failure: ConfigError | None = None
        try:
            cfg = config_module.load(self.explicit, env=env, profile=self.profile)
            problem = None
        except ConfigError as exc:
            problem, failure = str(exc), exc
            cfg = config_module.defaults(self.profile)
        try:
            key = keys.api_key(cfg, env)
        except ConfigError as exc:
            problem, key = problem or str(exc), None
        known = environment.values(cfg, env, key)
        logging_setup.add_secrets(known)  # (never in a log line, whoever logs them)
        hidden = environment.dropped(cfg, env)
        provider: Provider | ModelSet | None = None
        from bob_acp import providers  # (the chooser alone: a provider's own module loads when one is made)

        if problem is None:
            provider = providers.make_provider(cfg, env, known, key)
            if len(cfg.entries) > 1:  # the model picker's other models (models:)
                provider = providers.make_models(cfg, env, known, provider, self.log)
        no_model = (providers.no_model_message(cfg, env) if problem is None
                    else providers.config_problem_message(problem))
        runtime = Runtime(cfg, problem, provider, no_model, known, environment.child_env(cfg, env),
                          tuple(dict.fromkeys([*environment.key_variables(cfg), *hidden])), signature)
        runtime.failure = failure
        return runtime
