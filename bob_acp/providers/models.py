"""The models a session can use: `model:` and the entries of `models:`, each with its own
provider and endpoint, as one list the model picker offers.

An option is what the picker shows: each entry by its `id`, then the further names an entry
serves at its own endpoint (`choices`: a list, or `auto`: what the server lists at GET /models).
A session's choice is an option's value; None is the first option, the default.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bob_acp.config import Config, ModelSettings
    from bob_acp.log import Logger
    from bob_acp.providers.base import Provider


LIST_TIMEOUT = 3.0  # seconds GET /models may take at session/new
LIST_FRESH = 30.0  # seconds a server's list is reused before it is asked again
MAX_LISTED = 200  # names taken from one server's list


@dataclass
class Entry:
    id: str
    settings: ModelSettings  # its `model` section (bob_acp.config.Section)
    provider: Provider | None = None  # bob_acp.providers.base.Provider; None: not usable (why: `problem`)
    problem: str = ""
    key: str | None = None
    listed: list[str] = field(default_factory=list)  # names from GET /models (choices: auto)
    listed_at: float = 0.0

    @property
    def names(self) -> list[str]:
        """The further model names this entry serves at its endpoint."""
        choices = self.settings.choices
        return self.listed if choices == "auto" else list(choices)


@dataclass(frozen=True)
class Option:
    value: str  # what the picker sends back, and the session file keeps
    entry: Entry
    name: str  # the model's name at the entry's endpoint


class ModelSet:
    def __init__(self, entries: list[Entry], log: Logger | None = None):
        self.entries = entries
        self.log = log
        self._lock = threading.Lock()
        # Whether any entry fills its names from its server (session/new then waits for it).
        self.lists = any(entry.settings.choices == "auto" for entry in entries)

    @classmethod
    def single(cls, cfg: Config, provider: Provider | None, log: Logger | None = None) -> ModelSet:
        """The configured default model alone, served by `provider` (None: not usable)."""
        return cls([Entry(cfg.entries[0].id, cfg.entries[0], provider)], log)

    @property
    def default(self) -> Entry:
        return self.entries[0]

    def options(self) -> list[Option]:
        found: dict[str, Option] = {}
        for entry in self.entries:
            found.setdefault(entry.id, Option(entry.id, entry, entry.settings.name))
        for entry in self.entries:
            for name in entry.names:
                found.setdefault(name, Option(name, entry, name))
        return list(found.values())

    def pick(self, value: str | None) -> Option:
        """The option a session chose; the default for None or one no longer offered."""
        options = self.options()
        for option in options:
            if option.value == value:
                return option
        return options[0]

    def offered(self, value: str) -> bool:
        return any(option.value == value for option in self.options())

    # ---- choices: auto ------------------------------------------------------------------------

    def refresh(self) -> None:
        """Ask each `choices: auto` entry's server for its models (at most every LIST_FRESH s);
        a server that cannot say leaves the entry's own name alone, with one log line."""
        for entry in self.entries:
            if entry.settings.choices != "auto" or entry.provider is None:
                continue
            with self._lock:
                if time.monotonic() - entry.listed_at < LIST_FRESH and entry.listed_at:
                    continue
                entry.listed_at = time.monotonic()
            try:
                entry.listed = list_models(entry)
            except Exception as exc:  # any failure: the configured name stays the only one
                if self.log is not None:
                    self.log.info("[acp] model {model}: no model list from its server ({error}); offering {name} "
                                  "alone", model=entry.id, error=_scrubbed(str(exc), entry), name=entry.settings.name)


def _scrubbed(text: str, entry: Entry) -> str:
    """An error line without what the model's URL carries in its query or user part (a token)."""
    from bob_acp.providers import httpio

    wire = getattr(entry.provider, "wire", None)
    for secret in httpio.url_secrets(wire.models_url) if wire is not None else ():
        text = text.replace(secret, "[redacted]")
    return text


def list_models(entry: Entry) -> list[str]:
    """The names the server of a configured model lists (list_at)."""
    wire = getattr(entry.provider, "wire", None)
    if wire is None:
        raise ValueError(f"provider {entry.settings.provider} has no server to ask")
    return list_at(wire.models_url, {k: v for k, v in wire.headers.items() if k.lower() not in ("content-type", "accept")})


def list_at(models_url: str, headers: dict[str, str]) -> list[str]:
    """The names at GET <baseUrl>/models (OpenAI's shape: {"data": [{"id": …}]}, which Ollama,
    vLLM, llama.cpp and LM Studio serve), those that can be shown, sorted; ValueError (or a
    requests error) when there are none to be had."""
    from bob_acp import jsontext
    from bob_acp.providers import httpio

    with httpio.new_session() as session, \
            session.get(models_url, headers=headers, timeout=(LIST_TIMEOUT, LIST_TIMEOUT), stream=True) as response:
        if response.status_code != 200:
            elsewhere = httpio.redirected(response)
            raise ValueError(f"GET /models answered {response.status_code}" + (
                f" (a redirect to another origin, {elsewhere}, not followed)" if elsewhere else ""))
        # The whole answer within LIST_TIMEOUT too: a server dripping bytes is cut off.
        deadline = threading.Timer(LIST_TIMEOUT, httpio.shutdown, args=(response,))
        deadline.daemon = True
        deadline.start()
        try:
            data = response.raw.read(1024 * 1024 + 1, decode_content=True)
        finally:
            deadline.cancel()
    if len(data) > 1024 * 1024:
        raise ValueError("GET /models answered more than 1 MiB")
    try:
        document = jsontext.loads(data)
    except jsontext.JSONDecodeError:
        raise ValueError("GET /models did not answer JSON") from None
    items = document.get("data") if isinstance(document, dict) else None
    if not isinstance(items, list):
        raise ValueError("GET /models answered no data list")
    names = [item["id"] for item in items if isinstance(item, dict) and isinstance(item.get("id"), str)]
    return sorted({name for name in names if shown_name(name)})[:MAX_LISTED]


MAX_NAME = 200  # characters of a model name a server lists


def shown_name(name: str) -> bool:
    """Whether a name a server lists can be shown in the picker as it is: not empty, bounded, no
    control, format (bidi: a name that reads as another) or separator character."""
    import unicodedata

    from bob_acp import jsontext

    return (0 < len(name) <= MAX_NAME and name.strip() == name and jsontext.clean(name) == name
            and not any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs", "Co") for c in name))
