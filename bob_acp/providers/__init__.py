"""Model providers behind one interface (base.Provider), chosen by config.

Provider modules are imported only when chosen, so start-up never pays for `requests`.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing is not imported at start-up
    from typing import Any

    from bob_acp.providers.base import Provider

DEFAULT_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


def api_key_env(cfg: Any) -> str | None:
    """The environment variable that holds the API key for the chosen provider (None for script)."""
    if cfg.model.provider == "script":
        return None
    return cfg.model.apiKeyEnv or DEFAULT_KEY_ENV[cfg.model.provider]


def api_key(cfg: Any, env: dict[str, str]) -> str | None:
    """The key, stripped (a CRLF .env leaves "sk-…\r", which no header may carry): from the
    environment variable, else from model.apiKeyFile. ConfigError for a key file that others
    can read (as ssh refuses such a key) or that cannot be read."""
    name = api_key_env(cfg)
    if not name:
        return None
    key = env.get(name, "").strip()
    if key:
        return key
    return read_key_file(cfg.model.apiKeyFile) if cfg.model.apiKeyFile else None


def read_key_file(path: str) -> str | None:
    import os
    import stat

    from bob_acp.exceptions import ConfigError

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ConfigError(f"config key 'model.apiKeyFile': cannot read {path}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"config key 'model.apiKeyFile': {path} is not a regular file")
        if info.st_mode & 0o077:
            raise ConfigError(f"config key 'model.apiKeyFile': {path} can be read by others "
                              f"(mode {stat.S_IMODE(info.st_mode):04o}); run: chmod 600 {path}")
        data = os.read(fd, 64 * 1024)
    finally:
        os.close(fd)
    key = data.decode("utf-8", "replace").strip()
    return key or None


def make_provider(cfg: Any, env: dict[str, str], secrets: tuple[str, ...] = (),
                  key: str | None = None) -> Provider | None:
    """The configured provider, or None when no model is usable (prompts are then refused).

    A key is required only for a provider's official endpoint: local servers (Ollama,
    llama.cpp, vLLM) reached through model.baseUrl usually need none.
    """
    kind = cfg.model.provider
    if kind == "script":
        if not cfg.model.script:
            return None
        from bob_acp.providers.script import ScriptProvider

        return ScriptProvider(cfg)
    key = key if key is not None else api_key(cfg, env)
    if key is None and not cfg.model.baseUrl:
        return None
    if kind == "openai":
        from bob_acp.providers.openai import OpenAIProvider

        return OpenAIProvider(cfg, key, secrets)
    from bob_acp.providers.anthropic import AnthropicProvider

    return AnthropicProvider(cfg, key, secrets)


def config_problem_message(problem: str) -> str:
    """What a prompt answers when the config could not be used: the line, and the fix."""
    return (f"Bob could not use its configuration: {problem}\n\n"
            "Fix the file (`bob-acp --check` in a terminal shows the same line), or run `bob-acp setup` to write "
            "a working one; then start a new session.")


def no_model_message(cfg: Any, env: dict[str, str]) -> str:
    """What a prompt answers when no model is configured: exactly how to configure one."""
    where = cfg.source or "~/.config/bob/config.yaml"
    if cfg.model.provider == "script":
        first = f"No model is configured: provider `script` needs `model.script` (the path of a script file) in {where}."
    else:
        first = (f"No model is configured: provider `{cfg.model.provider}` needs an API key in the environment "
                 f"variable `{api_key_env(cfg)}` (or `model.baseUrl` for a local server such as Ollama).")
    return (
        f"{first}\n\n"
        "To configure one, either:\n"
        "- run `bob-acp setup` in a terminal: it asks for the provider, the model and the key, checks "
        "that the model answers and writes the config (the key in a file only you can read);\n"
        "- set `OPENAI_API_KEY` (OpenAI) or `ANTHROPIC_API_KEY` with `BOB_PROVIDER=anthropic` in the "
        "environment the editor starts Bob with; `BOB_MODEL` picks the model;\n"
        "- or point Bob at a local OpenAI-compatible server: `BOB_BASE_URL=http://127.0.0.1:11434/v1` "
        "and `BOB_MODEL=llama3.1` (Ollama; no key needed);\n"
        f"- or write `model:` settings (provider, name, baseUrl, apiKeyEnv) in {where}.\n"
        "Then start a new session. `bob-acp --check` tells whether the model answers."
    )
