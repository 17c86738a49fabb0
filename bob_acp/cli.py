"""Command line: arguments → config → logging → serve ACP on stdio → exit code."""

from __future__ import annotations

import os
import signal
import sys
from types import SimpleNamespace

from bob_acp import __version__

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    import threading
    from typing import Any

    from bob_acp.config import Config
    from bob_acp.jsonrpc.endpoint import Endpoint
    from bob_acp.log import Logger
    from bob_acp.providers.base import Provider
    from bob_acp.providers.models import ModelSet

EXIT_CONFIG = 2


def parse_args(argv: list[str]) -> argparse.Namespace:
    import argparse

    parser = argparse.ArgumentParser(
        prog="bob-acp",
        description="Bob, a bash-first coding agent, served over the Agent Client Protocol on stdio. "
        "`bob-acp chat` is a terminal client for it (see `bob-acp chat --help`).",
    )
    parser.add_argument("--acp", action="store_true", help="serve ACP on stdio (the default; accepted for editors that pass it)")
    parser.add_argument("--config", metavar="PATH", help="configuration file (default: $BOB_CONFIG, else ~/.config/bob/config.yaml)")
    parser.add_argument("--profile", choices=("default", "full"),
                        help="full: every opt-in feature on (sessions, history, selectors, MCP, sign-in); "
                             "a key set in the config file still wins")
    parser.add_argument("--check", action="store_true", help="print the effective config, the skills found and whether the model answers, then exit")
    parser.add_argument("--version", action="version", version=f"bob-acp {__version__}")
    return parser.parse_args(argv)


SUBCOMMANDS = ("chat", "setup")


def _editor_args(argv: list[str]) -> SimpleNamespace | None:
    """The options an editor passes, read without argparse; None for anything else."""
    found: dict[str, str | None] = {"config": None, "profile": None}
    index = 0
    while index < len(argv):
        item = argv[index]
        if item == "--acp":
            index += 1
        elif item in ("--config", "--profile") and index + 1 < len(argv) and found[item[2:]] is None:
            found[item[2:]] = argv[index + 1]
            index += 2
        else:
            return None
    if found["profile"] not in (None, "default", "full"):
        return None  # argparse says what is wrong with it
    return SimpleNamespace(check=False, **found)


def split_subcommand(argv: list[str]) -> tuple[list[str], str | None, list[str]]:
    """(global options, subcommand, its arguments): `bob-acp [--profile P] [--config F] setup …`,
    as a registry client runs a terminal sign-in (the agent's own command, then the method's args)."""
    index = 0
    while index < len(argv) and argv[index] not in SUBCOMMANDS:
        if argv[index] in ("--profile", "--config"):
            index += 2
        elif argv[index].startswith("--"):
            index += 1
        else:
            return argv, None, []
    if index >= len(argv):
        return argv, None, []
    return argv[:index], argv[index], argv[index + 1:]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    options, command, rest = split_subcommand(argv)
    if command == "chat":
        from bob_acp.chat import main as chat_main

        return chat_main(rest, agent_options=options)
    if command == "setup":
        from bob_acp.setup import main as setup_main

        return setup_main(rest, agent_options=options)
    # What editors run (`bob-acp [--acp] [--profile P] [--config F]`) skips argparse: start-up time
    # is the editor's.
    args = _editor_args(argv) or parse_args(argv)
    from bob_acp import config as config_module
    from bob_acp.exceptions import ConfigError

    try:
        cfg = config_module.load(args.config, profile=args.profile)
        problem = None
    except ConfigError as exc:
        if args.check:
            sys.stderr.write(f"bob-acp: {exc}\n")
            return EXIT_CONFIG
        # Serving ACP, a broken config is said in the editor, not as "the agent exited": Bob
        # answers initialize, and every prompt with this line and the way to fix it.
        problem = str(exc)
        cfg = config_module.defaults(args.profile)
    if args.check:
        from bob_acp.check import run_check

        try:
            return run_check(cfg)
        except ConfigError as exc:  # (the key file, read when the provider is made)
            sys.stderr.write(f"bob-acp: {exc}\n")
            return EXIT_CONFIG
        except BrokenPipeError:  # `bob-acp --check | head -1`
            _quiet_broken_pipe()
            return 0
        except Exception as exc:  # --check reports; it never ends in a traceback
            sys.stderr.write(f"bob-acp --check: {type(exc).__name__}: {exc}\n")
            return 1
    return serve(cfg, problem)


def _quiet_broken_pipe() -> None:
    """The reader went away: point stdout at /dev/null so the interpreter's final flush is quiet."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _guard_stdio() -> tuple[int, Any]:
    """Take the protocol stream off fd 1 and point fd 1 and sys.stdout at stderr, so a stray
    print, a library warning or a child can never write into the protocol. Children also get
    /dev/null, not the client's stream, as fd 0."""
    proto_out = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    proto_in = os.dup(0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return proto_out, os.fdopen(proto_in, "rb", buffering=1 << 16)


def serve(cfg: Config, problem: str | None = None) -> int:
    """Serve ACP on stdio. `problem`: the config error Bob could not start with (it then serves
    with the defaults, every prompt answered with that line and the fix)."""
    from bob_acp import environment, fswatch, providers, secrets
    from bob_acp import log as logging_setup
    from bob_acp.acp.server import AgentServer
    from bob_acp.jsonrpc.endpoint import Endpoint
    from bob_acp.jsonrpc.streams import Writer

    interactive = os.isatty(0)
    out_fd, in_stream = _guard_stdio()
    logging_setup.setup(cfg.log.level, cfg.log.format, cfg.log.file)
    log = logging_setup.get("bob")
    env = dict(os.environ)
    from bob_acp.exceptions import ConfigError

    try:
        key = providers.api_key(cfg, env)
    except ConfigError as exc:
        problem, key = problem or str(exc), None
    known = environment.values(cfg, env, key)
    logging_setup.add_secrets(known)
    redactor = secrets.Redactor(known)
    hidden = environment.dropped(cfg, env)
    secrets.hide_from_children(hidden)  # `env` keeps them for Bob's own use
    default = providers.make_provider(cfg, env, known, key) if problem is None else None
    provider: Provider | ModelSet | None = default
    if problem is None and len(cfg.entries) > 1:  # the model picker's other models (models:)
        provider = providers.make_models(cfg, env, known, default, log)
    no_model = providers.no_model_message(cfg, env) if problem is None else providers.config_problem_message(problem)
    if problem is not None:
        log.error(f"bob-acp: {problem}")
    cwd = os.getcwd()
    logging_setup.defer(lambda: _banner(log, cfg, provider, cwd))
    if interactive:
        sys.stderr.write("bob-acp speaks the Agent Client Protocol on stdin: one JSON-RPC frame a line, for an "
                         "editor to send. To talk to Bob in this terminal, run: bob-acp chat\n")

    endpoint: Endpoint | None = None
    writer = Writer(out_fd, on_broken=lambda: _output_closed(log, endpoint))
    server = AgentServer(cfg, log, provider, no_model, env=environment.child_env(cfg, env),
                         redact=redactor.tree if redactor else None, config_problem=problem,
                         hidden_env=tuple(dict.fromkeys([*environment.key_variables(cfg), *hidden])))
    wake_r, wake_w = os.pipe()

    def closed() -> None:
        try:
            server.on_close()
        finally:  # the main thread wakes whatever on_close did
            _poke(wake_w)

    endpoint = Endpoint(writer, server.routes(), server.notifications(), log,
                        on_close=closed, urgent=frozenset({"session/cancel"}),
                        cancel_method="$/cancel_request" if cfg.acp.cancelRequest else None,
                        on_read=fswatch.input_read)  # (what changed in the folders, looked at once a read)
    server.channel.endpoint = endpoint

    def stop(signum: int, _frame: object) -> None:
        log.info(f"[acp] {signal.Signals(signum).name}: shutting down")
        endpoint.stop()

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(signum, stop)
    import faulthandler  # SIGUSR1: every thread's stack to the log, and Bob goes on

    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True, chain=False)
    endpoint.serve(in_stream, wait=lambda done: _wait_awake(done, wake_r, wake_w))
    if "bob_acp.tools" in sys.modules:  # no tool ran if they were never loaded
        import importlib

        importlib.import_module("bob_acp.tools").kill_all()  # waits if the warm-up is importing it
    if "bob_acp.children" in sys.modules:  # what escaped its group; then the supervisor ends the rest
        from bob_acp import children

        children.shutdown()
    if not writer.close(timeout=0.3):
        log.warning("[acp] output not fully written: the client stopped reading")
    log.info("[acp] input closed: bye")
    logging_setup.close(0.5)
    _exit_now(0)
    return 0


def _poke(fd: int) -> None:
    try:
        os.write(fd, b"\0")
    except OSError:  # full (already awake) or closed: nothing to add
        pass


def _wait_awake(done: threading.Event, wake_r: int, wake_w: int) -> None:
    """The main thread waits for the end of serving in select(), never in a lock: a signal the
    kernel hands to another of Bob's threads writes to the wake-up pipe (signal.set_wakeup_fd),
    select() returns, and Python runs the handler here. (A main thread blocked in a lock
    acquire is woken only by a signal delivered to it: a SIGTERM could wait for ever.)"""
    import select

    os.set_blocking(wake_w, False)
    os.set_blocking(wake_r, False)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    while not done.is_set():
        select.select([wake_r], [], [])
        try:
            os.read(wake_r, 512)
        except BlockingIOError:
            pass


def _exit_now(code: int) -> None:
    """Everything owed is written and flushed: end without the interpreter's teardown (tens of
    milliseconds of module cleanup an editor waits for at every close)."""
    for stream in (sys.stderr, sys.__stderr__):
        try:
            stream.flush()  # type: ignore[union-attr]  # __stderr__ may be None: AttributeError
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(code)


def _output_closed(log: Logger, endpoint: Endpoint | None) -> None:
    """The client closed Bob's stdout: nobody can see what Bob does any more, so this is the end
    of the connection, as at the end of input."""
    log.info("[acp] output closed by the client (EPIPE): shutting down")
    if endpoint is not None:
        endpoint.stop()


def _banner(log: Logger, cfg: Config, provider: Provider | ModelSet | None, cwd: str) -> None:
    from bob_acp import skills

    catalog = skills.discover(cwd, cfg)
    default = getattr(provider, "default", None)  # (several models: a ModelSet, its default first)
    usable = provider is not None and (default is None or default.provider is not None)
    model = f"{cfg.model.provider}/{cfg.model.name}" if usable else f"{cfg.model.provider} (not configured)"
    if len(cfg.entries) > 1:
        model += f" (and {len(cfg.entries) - 1} more in the model picker)"
    names = ", ".join(catalog.skills) or "none"
    source = cfg.source or "defaults"
    log.info(f"bob {__version__} · model {model} · skills: {names} · config: {source}")
    if cfg.tools.sandbox != "off":
        from bob_acp import sandbox

        state = sandbox.status(cfg)
        if state is not None:
            line, warning = state
            (log.warning if warning else log.info)(line)
    for problem in catalog.warnings:
        log.warning(f"skills: {problem}")
