"""What Bob's children inherit of its environment, and which values Bob keeps secret.

Tools, MCP servers and the editor's terminals start without the variables `tools.env.drop`
names (shell patterns) and without every variable that holds a model's secret (its key, what its
headers read), so an approved `env` cannot put a key into a tool result, the next model request
or the session file; the values of those variables are redacted wherever they still turn up.
"""

from __future__ import annotations

import fnmatch

from bob_acp.config import keys
from bob_acp.secrets import MIN_SECRET

TYPE_CHECKING = False
if TYPE_CHECKING:

    from bob_acp.config import Config


def key_variables(cfg: Config) -> list[str]:
    """The variables that hold the models' secrets: every configured model's key and the
    variables its headers read, and the providers' usual key variables."""
    names = keys.secret_variables(cfg)
    return names + [v for v in dict.fromkeys(keys.DEFAULT_KEY_ENV.values()) if v not in names]


def dropped(cfg: Config, env: dict[str, str]) -> dict[str, str]:
    """The variables children do not inherit: the key's, and those matching tools.env.drop."""
    patterns = list(cfg.tools.env.drop)
    keys = set(key_variables(cfg))
    return {name: value for name, value in env.items()
            if name in keys or any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)}


def child_env(cfg: Config, env: dict[str, str]) -> dict[str, str]:
    """Bob's environment without the variables children do not inherit."""
    drop = dropped(cfg, env)
    return {name: value for name, value in env.items() if name not in drop}


def values(cfg: Config, env: dict[str, str], key: str | None) -> tuple[str, ...]:
    """Every secret value to redact, longest first: the keys, the dropped variables' values."""
    found = [key] if key else []
    found += [v.strip() for v in dropped(cfg, env).values()]
    found += keys.secret_values(cfg, env)
    return tuple(sorted({v for v in found if v and len(v) >= MIN_SECRET}, key=len, reverse=True))


