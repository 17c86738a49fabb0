"""Command line: arguments → config → logging → serve ACP on stdio → exit code."""

from __future__ import annotations

import os
import signal
import sys
import time
from types import SimpleNamespace

from bob_acp import __version__

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    import threading
    from collections.abc import Callable
    from typing import Any

    from bob_acp.acp.runtime import Runtime
    from bob_acp.config import Config
    from bob_acp.jsonrpc.endpoint import Endpoint
    from bob_acp.log import Logger

EXIT_CONFIG = 2


def parse_args(argv: list[str]) -> argparse.Namespace:
    import argparse

    parser = argparse.ArgumentParser(
        prog="bob-acp",
        description="Bob, a bash-first coding agent, served over the Agent Client Protocol on stdio: an editor "
        "(Zed, JetBrains, Neovim, Emacs) starts it.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="commands:\n"
               "  bob-acp setup         choose a model and save its key: the one step before a first session\n"
               "  bob-acp chat          talk to Bob in this terminal (bob-acp chat --demo: without a model)\n"
               "  bob-acp rules         this project's rules: what Bob always and never does here\n"
               "  bob-acp <command> --help   that command's options",
    )
    parser.add_argument("--acp", action="store_true", help="serve ACP on stdio (the default; accepted for editors that pass it)")
    parser.add_argument("--config", metavar="PATH", help="configuration file (default: $BOB_CONFIG, else ~/.config/bob/config.yaml)")
    parser.add_argument("--profile", choices=("default", "full"),
                        help="full: every opt-in feature on (sessions, history, selectors, MCP, sign-in); "
                             "a key set in the config file still wins")
    parser.add_argument("--check", action="store_true",
                        help="print the version, the effective config, what Bob would advertise, the sandbox here, "
                             "the skills found and whether each model answers, then exit (non-zero when something "
                             "configured cannot be had)")
    parser.add_argument("--json", action="store_true", help="with --check: the report as one JSON object")
    parser.add_argument("--version", action="version", version=f"bob-acp {__version__}")
    return parser.parse_args(argv)


SUBCOMMANDS = ("chat", "setup", "rules")


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
    return SimpleNamespace(check=False, json=False, **found)


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


def _in_utf8() -> None:
    """Bob talks UTF-8 with its children, files and peers, whatever the locale: where the
    locale's encoding is not UTF-8 (an ISO-8859-1 machine), it starts again in Python's UTF-8
    mode (`-X utf8`, which its children are not given)."""
    if sys.flags.utf8_mode or sys.getfilesystemencoding().lower().replace("-", "") == "utf8":
        return
    if not sys.executable or not getattr(sys, "orig_argv", None):
        return
    try:
        os.execv(sys.executable, [sys.executable, "-X", "utf8", *sys.orig_argv[1:]])
    except OSError:
        pass  # (it goes on as it is: names it cannot encode are refused one by one, in words)


def main(argv: list[str] | None = None) -> int:
    """The console script: whatever goes wrong before Bob serves is one line, never a traceback."""
    if argv is None:
        _in_utf8()
    try:
        return _main(sys.argv[1:] if argv is None else argv)
    except KeyboardInterrupt:
        return 130
    except MemoryError:
        sys.stderr.write("bob-acp: out of memory: the machine's limit on memory (ulimit -v) is reached; Bob needs "
                         f"{NEEDED_ADDRESS_SPACE // (1024 * 1024)} MiB\n")
        return 1
    except Exception as exc:
        sys.stderr.write(f"bob-acp: {type(exc).__name__}: {exc}\n")
        return 1


def _main(argv: list[str]) -> int:
    options, command, rest = split_subcommand(argv)
    if command == "chat":
        from bob_acp.chat import main as chat_main

        return chat_main(rest, agent_options=options)
    if command == "setup":
        from bob_acp.setup import main as setup_main

        return setup_main(rest, agent_options=options)
    if command == "rules":
        return _rules(options, rest)
    # What editors run (`bob-acp [--acp] [--profile P] [--config F]`) skips argparse: start-up time
    # is the editor's.
    args = _editor_args(argv) or parse_args(argv)
    if args.check:
        return _check(args)
    return serve(args.config, args.profile)


def _rules(options: list[str], rest: list[str]) -> int:
    """`bob-acp rules`: whether they apply is the configuration's (the profile's) to say."""
    from bob_acp import config as config_module
    from bob_acp.exceptions import ConfigError
    from bob_acp.rules.command import main as rules_main

    found = _editor_args(options) or parse_args(options)
    try:
        enabled: bool | str = config_module.load(found.config, profile=found.profile).permissions.projectRules
    except ConfigError as exc:  # (the rules themselves are still listed and changed)
        enabled = str(exc)
    return rules_main(rest, enabled)


def _check(args: Any) -> int:
    from bob_acp import config as config_module
    from bob_acp.check import run_check
    from bob_acp.exceptions import ConfigError

    try:
        cfg = config_module.load(args.config, profile=args.profile)
        return run_check(cfg, as_json=args.json)
    except ConfigError as exc:  # (or the key file, read when the provider is made)
        if args.json:
            import json

            print(json.dumps({"ok": False, "error": str(exc)}))
        sys.stderr.write(f"bob-acp: {exc}\n")
        return EXIT_CONFIG
    except BrokenPipeError:  # `bob-acp --check | head -1`
        _quiet_broken_pipe()
        return 0


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


def serve(explicit: str | None = None, profile: str | None = None) -> int:
    """Serve ACP on stdio. A config file Bob cannot use does not stop it: Bob serves with the
    defaults, every prompt answered with the problem and its fix, until the file is fixed (a
    session opened then uses it: bob_acp.acp.runtime)."""
    from bob_acp import log as logging_setup
    from bob_acp import secrets, threads
    from bob_acp.acp.lazy import loaded
    from bob_acp.acp.runtime import Reader
    from bob_acp.acp.server import AgentServer
    from bob_acp.jsonrpc.endpoint import Endpoint
    from bob_acp.jsonrpc.streams import Writer

    threads.economise()
    interactive = os.isatty(0)
    out_fd, in_stream = _guard_stdio()
    log = logging_setup.get("bob")
    reader = Reader(explicit, profile, dict(os.environ), log)
    runtime = reader.current
    cfg = runtime.cfg
    logging_setup.setup(cfg.log.level, cfg.log.format, cfg.log.file)
    short = _address_space_short()
    if short:
        log.warning(short)
    secrets.hide_from_children(runtime.hidden)  # (Bob keeps their values for its own use)
    if runtime.problem is not None:
        log.error(f"bob-acp: {runtime.problem}")
    cwd = os.getcwd()
    log.info(f"bob {__version__} · model {_model_line(runtime)} · config: {cfg.source or 'defaults'}")
    started = time.time()
    logging_setup.defer(lambda: _banner(log, cfg, cwd, started))  # (what takes a look around: off the start-up path)
    if interactive:
        sys.stderr.write("bob-acp speaks the Agent Client Protocol on stdin: one JSON-RPC frame a line, for an "
                         "editor to send. To talk to Bob in this terminal, run: bob-acp chat\n")

    endpoint: Endpoint | None = None
    writer = Writer(out_fd, on_broken=lambda: _output_closed(log, endpoint))
    server = AgentServer(reader, log)
    wake_r, wake_w = os.pipe()

    def closed() -> None:
        # From here the threads left (a warm-up importing, the log) hand the interpreter on at
        # once rather than every 5 ms: what is left to do is little, and a client waits for the exit.
        sys.setswitchinterval(0.0002)
        try:
            server.on_close()
        finally:  # the main thread wakes whatever on_close did
            _poke(wake_w)

    endpoint = Endpoint(writer, server.routes(), server.notifications(), log,
                        on_close=closed, urgent=frozenset({"session/cancel"}),
                        cancel_method="$/cancel_request" if cfg.acp.cancelRequest else None,
                        limit_words=threads.limit_words)
    server.channel.endpoint = endpoint

    # A handler only notes its signal (a deque's append takes no lock): the main thread acts on it
    # once the handler has returned, so a burst of signals never re-enters a lock a handler holds.
    import collections

    signals: collections.deque[int] = collections.deque(maxlen=64)
    stopping: list[int] = []  # (the signal that stopped Bob: said once)

    def noted(signum: int, _frame: object) -> None:
        signals.append(signum)

    def act() -> None:
        while signals:
            signum = signals.popleft()
            if signum == signal.SIGUSR1:
                _stacks()
            elif not stopping:
                stopping.append(signum)
                log.info(f"[acp] {signal.Signals(signum).name}: shutting down")
                endpoint.stop()

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1):
        signal.signal(signum, noted)
    endpoint.serve(in_stream, wait=lambda done: _wait_awake(done, wake_r, wake_w, act))
    bash, children = loaded("bob_acp.tools.bash"), loaded("bob_acp.processes.children")
    if bash is not None:  # (no command ran if it was never loaded)
        bash.kill_all()
    if children is not None:  # what escaped its group; then the supervisor ends the rest
        children.shutdown()
    if not writer.close(timeout=0.3):
        log.warning("[acp] output not fully written: the client stopped reading")
    log.info("[acp] input closed: bye")
    # Lines the user asked to be kept are worth a wait: idle this is milliseconds, but on a busy
    # machine the log thread may still be loading structlog for JSON lines when the input ends.
    logging_setup.close(5.0)
    _exit_now(0)
    return 0


NEEDED_ADDRESS_SPACE = 256 * 1024 * 1024  # what Bob needs to serve a whole turn (threads, buffers)


def _address_space_short() -> str | None:
    """One line when `ulimit -v` leaves Bob less than it needs (it goes on as far as it can)."""
    import resource

    try:
        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (OSError, ValueError):
        return None
    if soft == resource.RLIM_INFINITY or soft >= NEEDED_ADDRESS_SPACE:
        return None
    return (f"the address space is limited to {soft // (1024 * 1024)} MiB (ulimit -v): Bob needs "
            f"{NEEDED_ADDRESS_SPACE // (1024 * 1024)} MiB to serve a turn; what needs more fails, in words")


def _poke(fd: int) -> None:
    try:
        os.write(fd, b"\0")
    except OSError:  # full (already awake) or closed: nothing to add
        pass


DUMP_EVERY = 1.0  # seconds between two stack dumps at most (a flood of SIGUSR1 writes one a second)


class _Dumps:
    """When the last stack dump was written, and how many SIGUSR1 were skipped since."""

    def __init__(self) -> None:
        self.last = -DUMP_EVERY
        self.skipped = 0


_dumps = _Dumps()


def _stacks() -> None:
    """SIGUSR1: every thread's stack to the log, with its name and what it serves (session,
    request, turn state: threads.doing), and Bob goes on. One JSON record with log.format: json,
    a block of text otherwise; at most one a second. Made on the main thread once the signal's
    handler has returned, with the interpreter held (faulthandler's own handler walks the threads
    from the signal itself, and crashed Bob when a thread was in the middle of an import)."""
    import time

    now = time.monotonic()
    if now - _dumps.last < DUMP_EVERY:
        _dumps.skipped += 1
        return
    _dumps.last = now
    skipped, _dumps.skipped = _dumps.skipped, 0
    try:
        found = _threads()
    except Exception:  # noqa: BLE001  (a dump must never take Bob down)
        return
    from bob_acp import log

    if log.json_lines():
        log.get("bob").info("threads (SIGUSR1)", threads=found, skipped=skipped)
        return
    lines = [f"Bob's threads (SIGUSR1){f'; {skipped} signal(s) within a second of a dump skipped' if skipped else ''}:"]
    for thread in found:
        serves = ", ".join(f"{k} {v}" for k, v in thread.items() if k not in ("name", "id", "stack"))
        lines.append(f"  thread {thread['name']} ({thread['id']}){f': {serves}' if serves else ''}")
        lines += [f"    {frame}" for frame in thread["stack"]]
    text = "\n".join(lines) + "\n"

    def write() -> None:
        out = log.stream()
        out.write(text)
        out.flush()

    log.defer(write)


def _threads() -> list[dict[str, Any]]:
    """Each thread: its name, id, what it serves, and its stack (innermost last)."""
    import threading
    import traceback

    from bob_acp import threads

    frames = sys._current_frames()
    notes = threads.doing.snapshot()
    found = []
    for thread in threading.enumerate():
        frame = frames.get(thread.ident or 0)
        stack = [f"{f.filename}:{f.lineno} in {f.name}" for f in traceback.extract_stack(frame)] if frame else []
        found.append({"name": thread.name, "id": thread.ident, **notes.get(thread.ident or 0, {}), "stack": stack})
    return found


def _wait_awake(done: threading.Event, wake_r: int, wake_w: int, act: Callable[[], None]) -> None:
    """The main thread waits for the end of serving in select(), never in a lock: a signal the
    kernel hands to another of Bob's threads writes to the wake-up pipe (signal.set_wakeup_fd),
    select() returns, Python runs the handler here (which notes it), and `act` does what it asks.
    (A main thread blocked in a lock acquire is woken only by a signal delivered to it: a SIGTERM
    could wait for ever.)"""
    import select

    os.set_blocking(wake_w, False)
    os.set_blocking(wake_r, False)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    while not done.is_set():
        act()
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


def _model_line(runtime: Runtime) -> str:
    cfg = runtime.cfg
    model = f"{cfg.model.provider}/{cfg.model.name}" if runtime.usable else f"{cfg.model.provider} (not configured)"
    if len(cfg.entries) > 1:
        model += f" (and {len(cfg.entries) - 1} more in the model picker)"
    return model


def _banner(log: Logger, cfg: Config, cwd: str, at: float) -> None:
    """The start-up lines that take a look around (skills, sandbox, the orphan guard): looked
    at first, then logged together, stamped with the start-up's time (`at`), so that the log
    stays in time order. Nothing is said of a sandbox whose probe Bob's shutdown cut off."""
    from bob_acp.context import skills
    from bob_acp.processes import children

    catalog = skills.discover(cwd, cfg)
    state = None
    if cfg.tools.sandbox != "off":
        from bob_acp import sandbox

        if not sandbox.machine(bool(cfg.tools.sandboxNetwork)).cut_off and not children.closing():
            state = sandbox.status(cfg)
    guard = children.orphan_guard()
    log.info(f"skills: {', '.join(catalog.skills) or 'none'}", _at=at)
    if state is not None:
        line, warning = state
        (log.warning if warning else log.info)(line, _at=at)
    if guard:  # (said at every start: the guarantee that nothing Bob starts outlives it does not hold)
        log.warning(f"processes: a process that leaves its group may outlive Bob here: {guard}", _at=at)
    for problem in catalog.warnings:
        log.warning(f"skills: {problem}", _at=at)
