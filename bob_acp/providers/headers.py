"""Header values that read the environment (`${VAR}`): a gateway's token stays out of the config
file. (Its own small module: start-up reads which variables are secrets without loading the HTTP
code.)"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping

VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand(value: str, env: Mapping[str, str]) -> str:
    """A header value with each ${VAR} replaced by the environment's value ("" when unset), so a
    gateway's token stays out of the config file."""
    return VARIABLE.sub(lambda match: env.get(match.group(1), ""), value)


def variables(value: str) -> list[str]:
    """The environment variables a header value reads."""
    return VARIABLE.findall(value)
