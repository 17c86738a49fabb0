"""The models' keys and secrets: which environment variable or key file holds each model's key,
and which variables its headers read (`${VAR}`: a gateway's token stays out of the config file).

Here, below the providers, because both sides need the table: the config and the environment
children get (which variables are secrets) at start-up, and the providers when they send. Nothing
here loads HTTP code."""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping

    from bob_acp.config import Config, ModelSettings

VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand(value: str, env: Mapping[str, str]) -> str:
    """A header value with each ${VAR} replaced by the environment's value ("" when unset), so a
    gateway's token stays out of the config file."""
    return VARIABLE.sub(lambda match: env.get(match.group(1), ""), value)


def variables(value: str) -> list[str]:
    """The environment variables a header value reads."""
    return VARIABLE.findall(value)


DEFAULT_KEY_ENV = {"openai": "OPENAI_API_KEY", "openai-responses": "OPENAI_API_KEY",
                   "anthropic": "ANTHROPIC_API_KEY"}


def api_key_env(cfg: Config) -> str | None:
    """The environment variable that holds the API key of the default model (None for script)."""
    return key_env(cfg.model)


def key_env(settings: ModelSettings) -> str | None:
    """The environment variable that holds one model's API key (None for script)."""
    if settings.provider == "script":
        return None
    return settings.apiKeyEnv or DEFAULT_KEY_ENV[settings.provider]


def api_key(cfg: Config, env: dict[str, str]) -> str | None:
    return key_of(cfg.model, env)


def key_of(settings: ModelSettings, env: dict[str, str]) -> str | None:
    """One model's key, stripped (a CRLF .env leaves "sk-…\r", which no header may carry): from
    the environment variable, else from its apiKeyFile. ConfigError for a key file that others
    can read (as ssh refuses such a key) or that cannot be read."""
    name = key_env(settings)
    if not name:
        return None
    key = env.get(name, "").strip()
    if key:
        return key
    return read_key_file(settings.apiKeyFile) if settings.apiKeyFile else None


def secret_variables(cfg: Config) -> list[str]:
    """The variables that hold secrets of the configured models: their keys' variables and those
    their headers read (hidden from tools, redacted everywhere)."""
    names: list[str] = []
    for settings in cfg.entries:
        name = key_env(settings)
        names += [name] if name else []
        for value in settings.headers.values():
            names += variables(value)
    return list(dict.fromkeys(names))


def secret_values(cfg: Config, env: dict[str, str]) -> list[str]:
    """The secrets of every configured model: keys (from variables or key files) and the
    values their headers read."""
    from bob_acp.exceptions import ConfigError

    found = [env.get(name, "").strip() for name in secret_variables(cfg)]
    for settings in cfg.entries:
        try:
            found.append(key_of(settings, env) or "")
        except ConfigError:  # an unusable key file: the entry reports it itself, by name
            pass
        found += [expand(value, env) for value in settings.headers.values()]
    return [value for value in found if value]


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
