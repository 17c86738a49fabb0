"""`bob-acp setup`: give Bob a model and a key without editing YAML.

Asks (on a terminal) or takes from flags the provider, the base URL of an OpenAI-compatible
server, the model and the key; writes the key to a file only its owner can read (0600) and the
`model:` section of the config file (the file's other keys kept); then checks that the model
answers. Exit status: 0 when the model answered (or with --no-check), 1 when it did not (the
config is written all the same, and the reason said), 2 for what cannot be used.

It is also what an editor runs for the ACP `terminal` sign-in (`bob-acp … setup`).
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from typing import Any

TYPE_CHECKING = False
if TYPE_CHECKING:

    from bob_acp.config import Config

EXIT_OK, EXIT_NO_ANSWER, EXIT_USAGE = 0, 1, 2
KINDS = {
    "openai": ("openai", "gpt-4.1-mini", "OpenAI (chat completions)"),
    "openai-responses": ("openai-responses", "gpt-5-codex", "OpenAI, Responses API (its newest and reasoning models)"),
    "anthropic": ("anthropic", "claude-sonnet-4-5", "Anthropic"),
    "openai-compatible": ("openai", "", "an OpenAI-compatible server (Ollama, llama.cpp, vLLM, LM Studio, "
                                        "OpenRouter)"),
}
LOCAL_DEFAULT_URL = "http://127.0.0.1:11434/v1"


class SetupError(Exception):
    """One line to the user; exit status 2."""


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bob-acp setup", description="Give Bob a model and a key, checked.")
    parser.add_argument("--provider", choices=sorted(KINDS), help="where the model runs")
    parser.add_argument("--base-url", help="the server's URL (an OpenAI-compatible server), e.g. " + LOCAL_DEFAULT_URL)
    parser.add_argument("--model", help="the model's name at the provider")
    parser.add_argument("--key-stdin", action="store_true", help="read the API key from standard input")
    parser.add_argument("--key-file", metavar="PATH", help="where to keep the key (default: beside the config file)")
    parser.add_argument("--config", metavar="PATH", help="the config file to write (default: Bob's usual one)")
    parser.add_argument("--no-check", action="store_true", help="write the config without asking the model")
    return parser.parse_args(argv)


def main(argv: list[str], agent_options: list[str] | None = None) -> int:
    args = parse_args(argv)
    env = dict(os.environ)
    try:
        return run(args, env, _option(agent_options or [], "--config"))
    except SetupError as exc:
        sys.stderr.write(f"bob-acp setup: {exc}\n")
        return EXIT_USAGE
    except OSError as exc:  # (a read-only home, a full disk: the file that could not be written, in words)
        where = f": {exc.filename}" if exc.filename else ""
        sys.stderr.write(f"bob-acp setup: cannot write{where}: {exc.strerror or exc}; nothing was changed\n")
        return EXIT_USAGE
    except (KeyboardInterrupt, EOFError):
        sys.stderr.write("\nbob-acp setup: nothing written\n")
        return EXIT_USAGE


def run(args: argparse.Namespace, env: dict[str, Any], global_config: str | None) -> int:
    from bob_acp import config as config_module
    from bob_acp import exceptions
    from bob_acp.config import written

    path = os.path.abspath(os.path.expanduser(args.config or global_config or env.get("BOB_CONFIG")
                                              or config_module.default_path(env)))
    ask = Questions(sys.stdin.isatty() and not args.key_stdin)
    kind = args.provider or ask.choice("Where does the model run?", list(KINDS), [KINDS[k][2] for k in KINDS])
    provider, default_model, _ = KINDS[kind]
    base_url = args.base_url
    if kind == "openai-compatible" and not base_url:
        base_url = ask.text("The server's URL", LOCAL_DEFAULT_URL) if ask.interactive else LOCAL_DEFAULT_URL
    if base_url:
        problem = config_module.url_problem(base_url)
        if problem:
            raise SetupError(f"the base URL {base_url!r}: {problem}")
    key = _read_key(args, ask, base_url is None)
    if args.model:
        model = args.model
    elif base_url is not None:  # (any provider behind a server of the user's: its own list)
        model = _served_model(provider, base_url, key, ask, default_model)
    else:
        model = ask.text("The model", default_model)
    if key is None and base_url is None:
        variable = "ANTHROPIC_API_KEY" if provider == "anthropic" else "OPENAI_API_KEY"
        if not env.get(variable):
            raise SetupError(f"{KINDS[kind][2]} needs an API key: give it with --key-stdin (or on the terminal), "
                             f"or set {variable}")
    key_file = None
    if key is not None:
        key_file = os.path.abspath(os.path.expanduser(args.key_file or os.path.join(os.path.dirname(path),
                                                                                   f"{kind}.key")))
        unrecorded = written.write_key(key_file, key, env)
        if unrecorded:
            print(unrecorded)
    try:
        told = written.write_model(path, {"provider": provider, "name": model, "baseUrl": base_url,
                                          "apiKeyFile": key_file})
    except written.Unwritable as exc:
        raise SetupError(str(exc)) from None
    if told:
        print(told)
    print(f"wrote {path}" + (f" (the key in {key_file}, readable by you alone)" if key_file else ""))
    try:
        cfg = config_module.load(path, env={k: v for k, v in env.items() if not k.startswith("BOB_")})
    except exceptions.ConfigError as exc:
        raise SetupError(str(exc)) from None
    if args.no_check:
        return EXIT_OK
    return _check(cfg, env)


def _check(cfg: Config, env: dict[str, Any]) -> int:
    from bob_acp import providers
    from bob_acp.check import probe
    from bob_acp.exceptions import ConfigError

    try:
        provider = providers.make_provider(cfg, {k: v for k, v in env.items() if not k.startswith("BOB_")})
    except ConfigError as exc:
        raise SetupError(str(exc)) from None
    if provider is None:
        print("the model is not usable yet: " + providers.no_model_message(cfg, env).splitlines()[0])
        return EXIT_NO_ANSWER
    unreachable = _unreachable(getattr(getattr(provider, "wire", None), "url", None) or cfg.model.baseUrl)
    if unreachable:  # (said at once: the check's retries would wait in silence for seconds)
        print(f"model: {cfg.model.provider}/{cfg.model.name} cannot be reached: {unreachable}")
        print("the config is written; start the model's server (or fix the address) and run `bob-acp setup` again "
              "(or `bob-acp --check`)")
        return EXIT_NO_ANSWER
    answered, line = probe(cfg.model, provider)
    print(line)
    if not answered:
        print("the config is written; fix what the line above says and run `bob-acp setup` again "
              "(or `bob-acp --check`)")
    return EXIT_OK if answered else EXIT_NO_ANSWER


REACH_TIMEOUT = 3.0  # seconds setup gives a model's server to accept a connection


def _unreachable(url: str | None) -> str | None:
    """Why nothing accepts a connection at `url`'s host and port (within REACH_TIMEOUT), or None."""
    import socket
    from urllib.parse import urlsplit

    if not url:
        return None
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    if not host:
        return None
    from urllib.request import getproxies, proxy_bypass

    if (getproxies().get(parts.scheme) or getproxies().get("all")) and not proxy_bypass(host):
        return None  # (through a proxy: only the request itself can tell)
    try:
        socket.create_connection((host, port), timeout=REACH_TIMEOUT).close()
    except socket.timeout:
        return f"{host}:{port} did not answer within {REACH_TIMEOUT:g} s"
    except OSError as exc:
        return f"{host}:{port}: {exc.strerror or exc}"
    return None


def _served_model(provider: str, base_url: str, key: str | None, ask: "Questions", default: str) -> str:
    """The model to use at a server, picked from those it lists (GET /models, or Anthropic's
    /v1/models); typed in when it lists none. Without a terminal: the first listed. A server
    that is not there is said in a line, and no name is asked for it."""
    from bob_acp.providers.http import endpoint_url
    from bob_acp.providers.httpio import public_url
    from bob_acp.providers.models import list_at

    shown_url = public_url(base_url)
    unreachable = _unreachable(base_url)
    if unreachable:
        raise SetupError(f"nothing answers at {shown_url} ({unreachable}): start the model's server or check the "
                         "URL, then run setup again (or give --model and --no-check to write the config now)")
    if provider == "anthropic":
        url, headers = endpoint_url(base_url, "/v1/models"), {"anthropic-version": "2023-06-01"}
        headers.update({"x-api-key": key} if key else {})
    else:
        url, headers = endpoint_url(base_url, "/models"), ({"Authorization": f"Bearer {key}"} if key else {})
    try:
        served = list_at(url, headers)
    except ValueError as exc:  # (our own words: a status, no list, not JSON)
        print(f"the server at {shown_url} lists no models: {_one_line(exc)}")
        served = []
    except Exception:  # noqa: BLE001  (a connection that broke: no exception text, which says nothing to a person)
        print(f"the server at {shown_url} did not answer GET {public_url(url)}")
        served = []
    if not served:
        if not ask.interactive and not default:
            raise SetupError(f"--model is needed: the server at {shown_url} lists none")
        return ask.text("The model (its name at the server)", default)
    if not ask.interactive:
        return served[0]
    shown = served[:30]
    more = f" (and {len(served) - len(shown)} more: type a name)" if len(served) > len(shown) else ""
    return ask.choice(f"Which of the server's models?{more}", shown, shown, free=True)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__


def _read_key(args: argparse.Namespace, ask: "Questions", official: bool) -> str | None:
    if args.key_stdin:
        key = sys.stdin.readline().strip()
        return key or None
    if not ask.interactive:
        return None
    prompt = "The API key" + ("" if official else " (Enter for none: local servers need none)")
    key = getpass.getpass(prompt + ": ").strip()
    return key or None


class Questions:
    """Questions on the terminal; without one, a missing answer is an error naming the flag."""

    def __init__(self, interactive: bool):
        self.interactive = interactive

    def choice(self, question: str, values: list[str], labels: list[str], free: bool = False) -> str:
        """One of `values`, by its number or itself; `free`: any other text is taken as it is."""
        if not self.interactive:
            raise SetupError("--provider is needed without a terminal (" + ", ".join(values) + ")")
        print(question)
        for number, label in enumerate(labels, 1):
            print(f"  {number}) {label}")
        while True:
            answer = input(f"1-{len(values)}: ").strip()
            if answer.isdigit() and 1 <= int(answer) <= len(values):
                return values[int(answer) - 1]
            if answer in values or (free and answer):
                return answer

    def text(self, question: str, default: str) -> str:
        if not self.interactive:
            return default
        while True:
            answer = input(f"{question}" + (f" [{default}]" if default else "") + ": ").strip() or default
            if answer:
                return answer


def _option(options: list[str], name: str) -> str | None:
    for index, item in enumerate(options[:-1]):
        if item == name:
            return options[index + 1]
    return None
