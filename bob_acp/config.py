"""Typed configuration: defaults, the YAML file, environment overrides, validation.

Every key is declared once in SCHEMA with its type and default; the README's configuration
reference mirrors it. An unknown key or a wrong type raises ConfigError naming the key and file.
"""

from __future__ import annotations

import os
from collections import namedtuple

from bob_acp.exceptions import ConfigError

# kind: str | int | number | bool | list[str] | list[object] | map[str] | object | choices | enum;
# path: relative to the config file's folder.
# (A namedtuple, not typing.NamedTuple: start-up does not import typing.)
Key = namedtuple("Key", "kind default nullable choices minimum maximum path",
                 defaults=(False, (), None, None, False))

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from typing import Any


SCHEMA: dict[str, Any] = {
    "profile": Key("enum", "default", choices=("default", "full")),
    "model": {
        "provider": Key("enum", "openai", choices=("openai", "openai-responses", "anthropic", "script")),
        "name": Key("str", "gpt-4.1-mini"),
        "baseUrl": Key("str", None, nullable=True),
        "apiKeyEnv": Key("str", None, nullable=True),
        "apiKeyFile": Key("str", None, nullable=True, path=True),
        "script": Key("str", None, nullable=True, path=True),
        "maxTokens": Key("int", None, nullable=True, minimum=1),
        "temperature": Key("number", None, nullable=True, minimum=0, maximum=2),
        "timeout": Key("number", 120, minimum=0.001, maximum=86400),
        "callTimeout": Key("number", 600, minimum=0.001, maximum=86400),
        "retries": Key("int", 4, minimum=0, maximum=20),
        "thinking": Key("int", None, nullable=True, minimum=1024),
        "price": {
            "input": Key("number", None, nullable=True, minimum=0),
            "output": Key("number", None, nullable=True, minimum=0),
        },
        "choices": Key("choices", []),  # further names at the same endpoint, or "auto": the server's /models
        "reasoning": Key("enum", None, nullable=True, choices=("off", "low", "medium", "high")),
        "window": Key("int", None, nullable=True, minimum=256, maximum=2 ** 40),  # null: context.window
        "headers": Key("map[str]", {}),  # sent with every request; "${VAR}" in a value reads the environment
        "query": Key("map[str]", {}),  # added to the URL (Azure's api-version)
        "keyHeader": Key("str", None, nullable=True),  # the key in this header, as it is (Azure: api-key)
        "extraBody": Key("object", {}),  # merged into every request body
    },
    "models": Key("list[object]", []),  # further models for the picker: each a `model:` mapping with an `id`
    "context": {
        "window": Key("int", 128000, minimum=256, maximum=2 ** 40),
        "threshold": Key("number", 0.8, minimum=0.01, maximum=1),
        "keepLastTurns": Key("int", 2, minimum=0, maximum=1000000),
    },
    "sessions": {
        "enabled": Key("bool", False),
        "dir": Key("str", ".bob/sessions"),
    },
    "tools": {
        "bash": {
            "timeout": Key("number", 120, minimum=0.001),
            "outputLimit": Key("int", 30000, minimum=256, maximum=16 * 1024 * 1024),
        },
        "maxReadBytes": Key("int", 262144, minimum=1, maximum=64 * 1024 * 1024),
        "sandbox": Key("enum", "off", choices=("off", "workspace", "best-effort")),
        "sandboxNetwork": Key("bool", False),
        "plan": Key("bool", False),  # the update_plan tool (the editor shows the plan)
        "clientFs": Key("bool", False),  # file tools read and write through the editor (fs/*)
        "clientTerminal": Key("bool", False),  # bash runs in the editor's terminal (terminal/*)
        "env": {
            "drop": Key("list[str]", ["*_API_KEY", "*_SECRET*", "*_TOKEN"]),
        },
    },
    "loop": {
        "warnAt": Key("int", 3, minimum=2),
        "stopAt": Key("int", 5, minimum=2),
    },
    "limits": {
        "maxSessions": Key("int", 1024),
        "sessionOverflow": Key("enum", "refuse", choices=("refuse", "evict_oldest")),
        "maxModelCalls": Key("int", 50, minimum=1),
    },
    "skills": {
        "dirs": Key("list[str]", [], path=True),
    },
    "acp": {
        "sessionHistory": Key("bool", False),
        "configOptions": Key("bool", False),
        "replayStatus": Key("enum", "completed", choices=("completed", "recorded")),
        "auth": Key("bool", False),
        "embeddedContext": Key("bool", False),  # resource blocks in prompts (an editor's @-mention with content)
        "images": Key("bool", False),  # image blocks in prompts, given to the model
        "cancelRequest": Key("bool", False),  # $/cancel_request, both ways
        "additionalDirectories": Key("bool", False),  # sessions over more folders than one
    },
    "permissions": {
        "mode": Key("enum", "ask", choices=("ask", "sandboxed", "allow-edits", "allow-all")),
        "allowAlways": Key("enum", "tool", choices=("tool", "command")),
    },
    "mcp": {
        "enabled": Key("bool", False),
        "timeout": Key("number", 30, minimum=0.001, maximum=86400),
    },
    "chat": {
        "mcpServers": Key("list[object]", []),  # MCP servers `bob-acp chat` gives its sessions (ACP's shape)
    },
    "log": {
        "level": Key("enum", "info", choices=("debug", "info", "warning", "error")),
        "format": Key("enum", "console", choices=("console", "json")),
        "file": Key("str", None, nullable=True, path=True),
    },
}

# What `profile: full` (`--profile full`) switches on: every feature that is off by default
# because the default profile keeps Bob's documented 0.11 behaviour. A key set explicitly (in the
# file or by an environment override) wins over the profile.
FULL_PROFILE: dict[str, Any] = {
    "sessions.enabled": True,
    "acp.sessionHistory": True,
    "acp.configOptions": True,
    "acp.replayStatus": "recorded",
    "acp.auth": True,
    "permissions.allowAlways": "command",
    "mcp.enabled": True,
    "tools.sandbox": "workspace",
    "tools.plan": True,
    "tools.clientFs": True,
    "acp.embeddedContext": True,
    "acp.images": True,
    "acp.cancelRequest": True,
    "tools.clientTerminal": True,
    "acp.additionalDirectories": True,
}

ENV_OVERRIDES = {
    "BOB_PROVIDER": "model.provider",
    "BOB_MODEL": "model.name",
    "BOB_BASE_URL": "model.baseUrl",
}


class Section:
    """Read-only attribute access to one level of the config (cfg.model.name)."""

    def __init__(self, values: dict[str, Any]):
        # In the instance's own __dict__, so cfg.model.name is a plain attribute lookup: the
        # config is read on every request's path (a __getattr__ per step cost a Python call).
        own = object.__getattribute__(self, "__dict__")
        own.update(values)
        own["_values"] = values

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("config is read-only")

    def as_dict(self) -> dict[str, Any]:
        return {k: v.as_dict() if isinstance(v, Section) else v for k, v in self._values.items()}


class Config(Section):
    """The effective configuration; `source` is the file it came from, or None. `entries`: the
    models a session can use, each a `model` section with its `id`, the default first."""

    def __init__(self, values: dict[str, Any], source: str | None, entries: list[Section]):
        super().__init__(values)
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "entries", entries)


def default_path(env: dict[str, str]) -> str:
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "bob", "config.yaml")


def find_path(explicit: str | None, env: dict[str, str]) -> tuple[str, bool]:
    """The config file to read and whether it must exist (it must when named)."""
    if explicit:
        return explicit, True
    if env.get("BOB_CONFIG"):
        return env["BOB_CONFIG"], True
    return default_path(env), False


def load(explicit: str | None = None, env: dict[str, str] | None = None, profile: str | None = None) -> Config:
    """The effective configuration. `profile`: the command line's `--profile` (wins over the file's)."""
    env = dict(os.environ) if env is None else env
    path, required = find_path(explicit, env)
    raw: Any = {}
    source = None
    if os.path.exists(path) or required:
        source = os.path.abspath(os.path.expanduser(path))
        raw = _read_yaml(source)
    base_dir = os.path.dirname(source) if source else os.getcwd()
    values = _build(SCHEMA, raw, "", source or "<defaults>", base_dir)
    given = _given(raw)
    for var, dotted in ENV_OVERRIDES.items():
        if env.get(var):
            section, name = dotted.split(".")
            values[section][name] = _check(SCHEMA[section][name], env[var], dotted, f"${var}", base_dir)
            given.add(dotted)
    if profile is not None:
        values["profile"] = _check(SCHEMA["profile"], profile, "profile", "--profile", base_dir)
    if values["profile"] == "full":
        for dotted, value in FULL_PROFILE.items():
            section, name = dotted.split(".")
            if dotted not in given:
                values[section][name] = value
        if not values["sessions"]["enabled"] and "acp.sessionHistory" not in given:
            values["acp"]["sessionHistory"] = False  # sessions switched off explicitly: no history either
    where = source or "<defaults>"
    if values["loop"]["stopAt"] <= values["loop"]["warnAt"]:
        raise ConfigError(f"config key 'loop.stopAt' in {where}: must be greater than loop.warnAt")
    if values["permissions"]["mode"] == "sandboxed" and values["tools"]["sandbox"] == "off":
        raise ConfigError(f"config key 'permissions.mode' in {where}: sandboxed needs tools.sandbox: workspace "
                          "(or best-effort)")
    if values["acp"]["sessionHistory"] and not values["sessions"]["enabled"]:
        raise ConfigError(f"config key 'acp.sessionHistory' in {where}: needs sessions.enabled: true")
    if values["model"]["baseUrl"] is not None:
        origin = "$BOB_BASE_URL" if env.get("BOB_BASE_URL") else where
        problem = url_problem(values["model"]["baseUrl"])
        if problem:
            raise ConfigError(f"config key 'model.baseUrl' in {origin}: {problem}, got {_shown(values['model']['baseUrl'])}")
    entries = _model_entries(values, given, where, base_dir)
    if values["log"]["file"] is not None:
        problem = _log_file_problem(values["log"]["file"])
        if problem:
            raise ConfigError(f"config key 'log.file' in {where}: {problem}, got {_shown(values['log']['file'])}")
    return Config(_sections(values), source, entries)


def _entry(model: dict[str, Any], entry_id: str | None = None) -> Section:
    return Section(_sections({"id": entry_id or model["name"], **model}, SCHEMA["model"]))


def _model_entries(values: dict[str, Any], given: set[str], where: str, base_dir: str) -> list[Section]:
    """The models a session can pick: `model:` (when the file sets it, or there is no `models:`)
    and then each `models:` entry, every one checked as `model:` is; ids unique. With `models:`
    alone, its first entry is also what `model` reads."""
    schema = {"id": Key("str", None), **SCHEMA["model"]}
    entries: list[tuple[str, dict[str, Any]]] = []
    for index, raw in enumerate(values["models"]):
        dotted = f"models[{index}]"
        if not isinstance(raw.get("id"), str) or not raw["id"]:
            raise ConfigError(f"config key '{dotted}.id' in {where}: every entry needs an id (what the model "
                              "picker shows), got " + _shown(raw.get("id")))
        built = _build(schema, raw, dotted + ".", where, base_dir)
        if built["baseUrl"] is not None and url_problem(built["baseUrl"]):
            raise ConfigError(f"config key '{dotted}.baseUrl' in {where}: {url_problem(built['baseUrl'])}, "
                              f"got {_shown(built['baseUrl'])}")
        entries.append((built.pop("id"), built))
    if entries and not any(key == "model" or key.startswith("model.") for key in given):
        values["model"] = dict(entries[0][1])  # `model` is the default entry
    else:
        entries.insert(0, (values["model"]["name"], values["model"]))
    seen: set[str] = set()
    for entry_id, _ in entries:
        if entry_id in seen:
            raise ConfigError(f"config key 'models' in {where}: the id {_shown(entry_id)} is given twice "
                              "(model.name counts as the id of `model:`)")
        seen.add(entry_id)
    return [_entry(model, entry_id) for entry_id, model in entries]


def _given(raw: Any, prefix: str = "") -> set[str]:
    """The dotted keys the file sets itself."""
    found: set[str] = set()
    if isinstance(raw, dict):
        for name, value in raw.items():
            dotted = prefix + str(name)
            found.add(dotted)
            found |= _given(value, dotted + ".")
    return found


def url_problem(url: str) -> str | None:
    """Why `url` cannot be a model endpoint, or None (checked at start-up, not at the first prompt)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"not a valid URL ({exc})"
    if parts.scheme not in ("http", "https"):
        if not parts.scheme or not parts.netloc:
            return "needs a scheme and a host, such as http://127.0.0.1:11434/v1"
        return f"the scheme must be http or https, not {parts.scheme}"
    if not parts.hostname:
        return "needs a host, such as http://127.0.0.1:11434/v1"
    if port == 0:
        return "port 0 is not a port"
    if any(c.isspace() for c in url):
        return "must not contain white space"
    return None


def _log_file_problem(path: str) -> str | None:
    folder = os.path.dirname(path) or "."
    if os.path.isdir(path):
        return "names a directory, not a file"
    if not os.path.isdir(folder):
        return f"its folder {folder} does not exist"
    if not os.access(folder, os.W_OK) and not os.access(path, os.W_OK):
        return f"its folder {folder} is not writable"
    return None


def _shown(value: Any, limit: int = 80) -> str:
    """A value in an error message: a bounded repr, so a YAML alias bomb stays one short line."""
    text = _bounded_repr(value, limit)
    return text if len(text) <= limit else text[:limit] + "…"


def _bounded_repr(value: Any, limit: int, depth: int = 0) -> str:
    if isinstance(value, (dict, list)):
        if depth > 3:
            return "{…}" if isinstance(value, dict) else "[…]"
        pieces, size = [], 0
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            piece = (f"{key!r}: " if isinstance(value, dict) else "") + _bounded_repr(item, limit, depth + 1)
            pieces.append(piece)
            size += len(piece) + 2
            if size > limit:
                pieces.append("…")
                break
        inner = ", ".join(pieces)
        return "{" + inner + "}" if isinstance(value, dict) else "[" + inner + "]"
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def _sections(values: dict[str, Any], schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """Each section of the schema as a Section; a mapping value (model.headers) stays a dict."""
    schema = SCHEMA if schema is None else schema
    return {k: Section(_sections(v, schema[k])) if isinstance(schema.get(k), dict) else v for k, v in values.items()}


def _read_yaml(path: str) -> Any:
    import yaml  # lazy: only start-ups with a config file pay for it

    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except FileNotFoundError:
        raise ConfigError(f"config file {path}: not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {path}: cannot read: {exc}") from None
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" at line {where.line + 1}" if where else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(f"config file {path}: invalid YAML{line}: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: the top level must be a mapping of keys")
    return data


def _build(schema: dict, raw: Any, prefix: str, source: str, base_dir: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ConfigError(f"config key '{prefix.rstrip('.')}' in {source}: must be a mapping")
    for name in raw:
        if name not in schema:
            raise ConfigError(f"config key '{prefix}{name}' in {source}: unknown key")
    out: dict[str, Any] = {}
    for name, spec in schema.items():
        dotted = prefix + name
        if isinstance(spec, dict):  # a section left empty (`model:`) is all defaults; `model: 0` is an error
            out[name] = _build(spec, {} if raw.get(name) is None else raw[name], dotted + ".", source, base_dir)
        elif name in raw:
            out[name] = _check(spec, raw[name], dotted, source, base_dir)
        else:
            out[name] = type(spec.default)(spec.default) if isinstance(spec.default, (list, dict)) else spec.default
    return out


def _check(spec: Key, value: Any, dotted: str, source: str, base_dir: str) -> Any:
    def fail(problem: str) -> ConfigError:
        return ConfigError(f"config key '{dotted}' in {source}: {problem}, got {_shown(value)}")

    if value is None:
        if spec.nullable:
            return None
        raise fail("must not be null")
    if spec.kind == "enum":
        if value not in spec.choices:
            raise fail("must be one of " + ", ".join(spec.choices))
    elif spec.kind == "str":
        if not isinstance(value, str) or not value:
            raise fail("must be a non-empty string")
    elif spec.kind == "bool":
        if not isinstance(value, bool):
            raise fail("must be true or false")
    elif spec.kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise fail("must be a whole number")
    elif spec.kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
            raise fail("must be a number")
    elif spec.kind == "list[str]":
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise fail("must be a list of strings")
    elif spec.kind == "list[object]":
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise fail("must be a list of mappings")
    elif spec.kind == "map[str]":
        if not isinstance(value, dict) or not all(isinstance(k, str) and k and isinstance(v, str)
                                                  for k, v in value.items()):
            raise fail("must be a mapping of names to strings")
    elif spec.kind == "object":
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise fail("must be a mapping")
    elif spec.kind == "choices":
        if value != "auto" and (not isinstance(value, list) or not all(isinstance(v, str) and v for v in value)):
            raise fail('must be a list of model names, or "auto"')
    if spec.minimum is not None and value < spec.minimum:
        raise fail(f"must be at least {spec.minimum:g}")
    if spec.maximum is not None and value > spec.maximum:
        raise fail(f"must be at most {spec.maximum:g}")
    if spec.path:
        value = [_resolve(v, base_dir) for v in value] if isinstance(value, list) else _resolve(value, base_dir)
    return value


def _resolve(path: str, base_dir: str) -> str:
    return os.path.normpath(os.path.join(base_dir, os.path.expanduser(path)))


def defaults(profile: str | None = None) -> Config:
    """The built-in defaults alone, of a profile (tests, and a Bob whose config file is broken)."""
    return load(env={"XDG_CONFIG_HOME": "/nonexistent-bob-config"}, profile=profile)
