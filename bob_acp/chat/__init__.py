"""`bob-acp chat`: a terminal client that spawns bob-acp and talks ACP to it (threads, no asyncio).

    bob-acp chat                  interactive: line editing and history, a paste is one prompt
    bob-acp chat "PROMPT"         one turn, then exit (0 done, 130 cancelled, 1 otherwise)
    bob-acp chat --demo           a scripted turn with no model configured

The agent runs with the full profile unless a profile is named (--profile, or `profile:` in the
config file). Permission is asked on the terminal: y (once), a (always), n (reject), and with
project rules p (always in this project) and v (never). Ctrl-C cancels the running turn (at a
permission question too); at the prompt it clears the line and a second one quits; /quit and
Ctrl-D quit.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time

from bob_acp import visible
from bob_acp.chat.agent import Agent, agent_command
from bob_acp.chat.ask import Asker, Prompter, Typing, typed_text
from bob_acp.chat.client import EXIT_CANCELLED, EXIT_FAILED, EXIT_OK, EXIT_USAGE, Chat, ChatError, Quit, Said
from bob_acp.chat.render import Screen, use_colour

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bob-acp chat", description="Talk to Bob in the terminal over ACP.")
    parser.add_argument("prompt", nargs="?", help="run this one prompt and exit")
    answers = parser.add_mutually_exclusive_group()
    answers.add_argument("--yes", action="store_true", help="allow every tool call without asking")
    answers.add_argument("--no", action="store_true", help="reject every tool call without asking")
    parser.add_argument("--json", action="store_true",
                        help="print the agent's frames as NDJSON on stdout, nothing else (questions go to the terminal)")
    parser.add_argument("--load", metavar="ID", help="go on with a saved session (needs sessions.enabled)")
    parser.add_argument("--resume", action="store_true", help="pick a saved session of this folder to go on with")
    parser.add_argument("--continue", dest="latest", action="store_true", help="go on with this folder's latest session")
    parser.add_argument("--model", metavar="NAME", help="the model for this run (as BOB_MODEL)")
    parser.add_argument("--profile", choices=("default", "full"),
                        help="the agent's profile (default here: full, as editors start it, unless the config file "
                             "names one; default: Bob's minimal behaviour)")
    parser.add_argument("--demo", action="store_true", help="play the shipped demo script in a temporary folder")
    parser.add_argument("--cwd", default=None, help="the session's working directory (default: here)")
    parser.add_argument("--config", metavar="PATH", help="configuration file for the agent")
    return parser.parse_args(argv)



def _demo(env: dict[str, Any]) -> tuple[str, str, str]:
    """(temporary folder, its config, the project folder) for the demo."""
    import orjson

    folder = tempfile.mkdtemp(prefix="bob-demo-")
    config = os.path.join(folder, ".bob-demo-config.yaml")
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "demo.yaml")
    with open(config, "w", encoding="utf-8") as handle:
        handle.write(f"model:\n  provider: script\n  script: {orjson.dumps(script).decode()}\nlog:\n  level: warning\n")
    project = os.path.join(folder, "project")
    os.makedirs(project)
    return folder, config, project


def main(argv: list[str], agent_options: list[str] | None = None) -> int:
    args = parse_args(argv)
    env = dict(os.environ)
    cwd = os.path.abspath(args.cwd or os.getcwd())
    asker = Asker(args.yes, args.no, sys.stderr)
    if args.json and not asker.can_ask:
        sys.stderr.write("bob-acp chat: --json needs --yes or --no here: there is no terminal to ask permission on\n")
        return EXIT_USAGE
    demo_dir, config = None, args.config
    if args.demo:
        demo_dir, config, cwd = _demo(env)
        # A demo ended by a signal still removes its folder (the finally below runs on SystemExit).
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, lambda number, _frame: sys.exit(128 + number))
    if args.model:
        env["BOB_MODEL"] = args.model  # the agent reads it as model.name, for this run only
    # The chat is a client, as an editor is, and starts its agent as editors do: with the full
    # profile, unless the person names one (--profile, or `profile:` in the config file).
    from bob_acp.config import file_profile

    profile = args.profile or (None if file_profile(config, env) else "full")
    options = list(agent_options or []) + (["--profile", profile] if profile else [])
    screen = Screen(sys.stdout, use_colour(sys.stdout, env) and not args.json, cwd, quiet=args.json)
    agent = Agent(agent_command(config, options), env, sys.stdout if args.json else None)
    chat = Chat(agent, screen, asker, cwd)
    cfg, problem = read_config(config, env)  # (once: what the chat says of it, as the agent reads it)
    chat.mcp_servers = list(cfg.chat.mcpServers) if cfg is not None else []
    if sys.stdin.isatty() and args.prompt is None and not args.demo:
        chat.typed = sys.stdin  # (piped prompts stay prompts, one after the other)
        chat.typing = Typing(sys.stdin)
    try:
        return _run(chat, args, Prompter(env), cfg, problem)
    except (Quit, KeyboardInterrupt):  # (a Ctrl-C between two steps of the chat is a quit too)
        _no_more_interrupts()
        screen.line("bye")
        return EXIT_CANCELLED if args.prompt is not None or args.demo else EXIT_OK
    except ChatError as exc:
        chat.failed = True
        if args.json:
            sys.stderr.write(f"bob-acp chat: {exc}\n")
        else:
            screen.line(f"bob-acp chat: {exc}", "red")
        return EXIT_FAILED
    except BrokenPipeError:  # `bob-acp chat … | head`
        _quiet_stdout()
        return EXIT_OK
    finally:
        _no_more_interrupts()  # leaving: a Ctrl-C now (a person pressing twice) changes nothing
        try:
            agent.close(keep_log=chat.failed, err=sys.stderr)
        finally:
            asker.close()
            if demo_dir:
                shutil.rmtree(demo_dir, ignore_errors=True)


def _run(chat: Chat, args: argparse.Namespace, prompter: Prompter, cfg: Any, problem: str) -> int:
    chat.start(args.load, args.resume, args.latest)
    screen = chat.screen
    if args.demo or args.prompt is not None:
        if args.demo:
            screen.line(f"Demo: a scripted model, working in {chat.cwd}. Bob asks before it runs a command or "
                        "writes a file: answer y (yes once) or a (always).", "dim")
        stop = chat.turn(args.prompt or "Show me what you can do.")
        if args.demo and chat.skipped:  # (the script's words go on as if each step ran: they did not)
            screen.line(f"The demo skipped {len(chat.skipped)} step(s), rejected because there was no terminal to "
                        f"ask on: {'; '.join(chat.skipped)}. Nothing of them ran, whatever the script said after. "
                        "Run `bob-acp chat --demo` in a terminal to answer each, or add --yes to allow them all.",
                        "yellow")
        return EXIT_OK if stop == "end_turn" else EXIT_CANCELLED if stop == "cancelled" else EXIT_FAILED
    if problem:
        screen.line(f"Bob's configuration cannot be used: {visible.line(problem)}. Prompts are answered with this "
                    "line until it is fixed; /new then opens a session with the fix.", "yellow")
    if chat.no_session:
        if not problem:
            screen.line(f"Bob has no usable model yet: {chat.no_session}", "yellow")
        screen.line(f"No session yet (in {chat.cwd}): once the model is set up, /new (or a prompt) opens one with "
                    "the configuration as it is then. /help lists the commands; /quit or Ctrl-D leaves.", "dim")
    else:
        screen.line(f"Bob is ready (session {chat.session_id}, in {chat.cwd}){model_words(cfg)}. "
                    "/help lists the commands; /quit or Ctrl-D leaves.", "dim")
    try:
        return _loop(chat, prompter)
    finally:
        prompter.save()


def _loop(chat: Chat, prompter: Prompter) -> int:
    screen = chat.screen
    armed = False  # a first Ctrl-C at the prompt: a second one quits
    while True:
        try:
            if chat.typed_ahead:  # (typed during a turn that was ending: sent as it was typed)
                text = chat.typed_ahead.pop(0)
                screen.line(f"you> {visible.line(text)}", "bold")
            else:
                text = typed_text(prompter.read(screen.prompt("you> ", "bold")))
        except EOFError:
            screen.line("")
            return EXIT_OK
        except KeyboardInterrupt:
            if armed or time.monotonic() - chat.last_interrupt < chat.QUIT_WINDOW:
                raise Quit() from None  # a second Ctrl-C, also right after one that cancelled a turn
            armed = True
            screen.at_line_start = False
            screen.line("(line cleared: Ctrl-C again, Ctrl-D or /quit to leave)", "dim")
            continue
        armed = False
        command = text.strip()
        if not command:
            continue
        if command in ("/quit", "/exit"):
            return EXIT_OK
        if command == "/help":
            chat.drain()
            screen.line(chat.help_text())
            continue
        word, _, rest = command.partition(" ")
        if word == "/new":
            chat.drain()
            try:
                chat.new_session()
            except Said as exc:
                screen.line(str(exc), "yellow")
            continue
        if word in ("/sessions", "/model", "/mode"):
            chat.drain()
            try:
                if word == "/sessions":
                    chat.choices.show_sessions()
                else:
                    chat.choices.show_or_set(word[1:], rest.strip())
            except Said as exc:
                screen.line(str(exc), "yellow")
            continue
        chat.drain()
        unknown = chat.unknown_command(word)
        if unknown:
            screen.line(unknown, "yellow")
            continue
        if not chat.session_id:  # (no usable model at the start: the fix may have come since)
            try:
                chat.new_session()
            except Said as exc:
                screen.line(str(exc), "yellow")
                continue
        chat.turn(text)


def read_config(path: str | None, env: dict[str, Any]) -> tuple[Any, str]:
    """Bob's config as the agent reads it (the same code): (it, ""), or (None, the one line
    saying why it cannot be used: the agent says so too, at the first prompt)."""
    from bob_acp import config as config_module
    from bob_acp.exceptions import ConfigError

    try:
        return config_module.load(path, env=env), ""
    except ConfigError as exc:
        return None, str(exc)


def model_words(cfg: Any) -> str:
    """The model the agent will use, as its config and environment say ("" when the config
    cannot be used: the agent says what is wrong at the first prompt)."""
    if cfg is None:
        return ""
    model = cfg.model
    where = f" at {model.baseUrl}" if model.baseUrl else ""
    return f" · model {visible.line(model.provider)}/{visible.line(model.name)}{visible.line(where)}"


def _no_more_interrupts() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _quiet_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)

