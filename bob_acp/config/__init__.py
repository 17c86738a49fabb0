"""Loading the configuration: defaults, the YAML file, environment overrides, the profile,
validation; and the configuration reference made from the declarations.

Every key is declared once, in bob_acp.config.schema (its type, default, limits, profile value
and documentation). An unknown key or a wrong type raises ConfigError naming the key and file.
"""

from __future__ import annotations

import os

from bob_acp.config.schema import Config, Key, ModelEntry, ModelSettings, Section, SectionRef, declared
from bob_acp.exceptions import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["Config", "ModelEntry", "ModelSettings", "Section", "load", "defaults", "reference", "FULL_PROFILE", "ENV_OVERRIDES"]


def _schema(cls: type) -> dict[str, Any]:
    """A section's declarations as a nested mapping (sections as mappings of their keys)."""
    return {name: _schema(spec.cls) if isinstance(spec, SectionRef) else spec for name, spec in declared(cls).items()}


def _flat(schema: dict[str, Any], prefix: str = "") -> dict[str, Key]:
    out: dict[str, Key] = {}
    for name, spec in schema.items():
        if isinstance(spec, dict):
            out.update(_flat(spec, f"{prefix}{name}."))
        else:
            out[prefix + name] = spec
    return out


SCHEMA: dict[str, Any] = _schema(Config)
_CLASSES: dict[str, type] = {}  # dotted section name -> its class


def _classes(cls: type, prefix: str = "") -> None:
    for name, spec in declared(cls).items():
        if isinstance(spec, SectionRef):
            _CLASSES[prefix + name] = spec.cls
            _classes(spec.cls, f"{prefix}{name}.")


_classes(Config)
ENTRY_SCHEMA: dict[str, Any] = {"id": Key(None, "what the model picker shows", kind="str"), **SCHEMA["model"]}

# What `profile: full` (`--profile full`) switches on: every feature that is off by default
# because the default profile keeps Bob's minimal behaviour. A key set explicitly (in the
# file or by an environment override) wins over the profile.
FULL_PROFILE: dict[str, Any] = {dotted: spec.full for dotted, spec in _flat(SCHEMA).items() if spec.full is not None}
ENV_OVERRIDES: dict[str, str] = {spec.env: dotted for dotted, spec in _flat(SCHEMA).items() if spec.env}


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


def file_profile(explicit: str | None = None, env: dict[str, str] | None = None) -> str | None:
    """The profile the config file names itself (`profile:`), None when it names none or cannot
    be read (load() says why)."""
    env = dict(os.environ) if env is None else env
    path, _required = find_path(explicit, env)
    try:
        raw = read_yaml(os.path.abspath(os.path.expanduser(path))) if os.path.exists(path) else {}
    except ConfigError:
        return None
    named = raw.get("profile") if isinstance(raw, dict) else None
    return named if isinstance(named, str) else None


def load(explicit: str | None = None, env: dict[str, str] | None = None, profile: str | None = None) -> Config:
    """The effective configuration. `profile`: the command line's `--profile` (wins over the file's)."""
    env = dict(os.environ) if env is None else env
    path, required = find_path(explicit, env)
    raw: object = {}
    source = None
    if os.path.exists(path) or required:
        source = os.path.abspath(os.path.expanduser(path))
        raw = read_yaml(source)
    base_dir = os.path.dirname(source) if source else os.getcwd()
    values = _build(SCHEMA, raw, "", source or "<defaults>", base_dir)
    given = _given(raw)
    # BOB_MODEL naming a `models:` entry's id picks that entry (it is the model a session starts
    # with); any other value is `model.name`.
    chosen = env.get("BOB_MODEL") or None
    if chosen not in [entry.get("id") for entry in values["models"] if isinstance(entry, dict)]:
        chosen = None
    for var, dotted in ENV_OVERRIDES.items():
        if env.get(var) and not (chosen and var == "BOB_MODEL"):
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
    entries = _model_entries(values, given, where, base_dir, chosen)
    if values["log"]["file"] is not None:
        problem = _log_file_problem(values["log"]["file"])
        if problem:
            raise ConfigError(f"config key 'log.file' in {where}: {problem}, got {_shown(values['log']['file'])}")
    return Config(_sections(values), source, entries)


def _entry(model: dict[str, Any], entry_id: str | None = None) -> ModelEntry:
    return ModelEntry(_sections({"id": entry_id or model["name"], **model}, "model."))


def _model_entries(values: dict[str, Any], given: set[str], where: str, base_dir: str,
                   chosen: str | None = None) -> list[ModelEntry]:
    """The models a session can pick: `model:` (when the file sets it, or there is no `models:`)
    and then each `models:` entry, every one checked as `model:` is; ids unique. With `models:`
    alone, its first entry is also what `model` reads. `chosen`: the id of the entry that comes
    first instead (what `model` reads then), named by BOB_MODEL."""
    schema = ENTRY_SCHEMA
    entries: list[tuple[str, dict[str, Any]]] = []
    for index, raw in enumerate(values["models"]):
        dotted = f"models[{index}]"
        if not isinstance(raw.get("id"), str) or not raw["id"]:
            raise ConfigError(f"config key '{dotted}.id' in {where}: every entry needs an id (what the model "
                              "picker shows), got " + _shown(raw.get("id")))
        built = _build(schema, raw, dotted + ".", where, base_dir)
        problem = url_problem(built["baseUrl"]) if built["baseUrl"] is not None else None
        if problem:
            raise ConfigError(f"config key '{dotted}.baseUrl' in {where}: {problem}, "
                              f"got {_shown(built['baseUrl'])}")
        entries.append((built.pop("id"), built))
    if chosen is not None:
        picked = next(entry for entry in entries if entry[0] == chosen)
        entries.remove(picked)
        if any(key == "model" or key.startswith("model.") for key in given):
            entries.insert(0, (values["model"]["name"], values["model"]))
        entries.insert(0, picked)
        values["model"] = dict(picked[1])
    elif entries and not any(key == "model" or key.startswith("model.") for key in given):
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


def _given(raw: object, prefix: str = "") -> set[str]:
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


def _shown(value: object, limit: int = 80) -> str:
    """A value in an error message: a bounded repr, so a YAML alias bomb stays one short line."""
    text = _bounded_repr(value, limit)
    return text if len(text) <= limit else text[:limit] + "…"


def _bounded_repr(value: object, limit: int, depth: int = 0) -> str:
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


def _sections(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Each section of the schema as its Section class; a mapping value (model.headers) stays a dict."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        cls = _CLASSES.get(prefix + name)
        out[name] = cls(_sections(value, f"{prefix}{name}.")) if cls is not None else value
    return out


MAX_CONFIG_BYTES = 256 * 1024  # a config file is a few KiB; past this it is refused, never read on
MAX_DEPTH = 32  # levels of nesting a config file may have (extraBody is the deepest need: a few)
MAX_VALUES = 100_000  # values a config file may hold once its YAML aliases are expanded


class ConfigUnreadable(ConfigError):
    """The config file cannot be read at all (not a regular file, too large, an I/O error): a
    running Bob keeps the configuration it read last."""


def read_text(path: str) -> str:
    """The config file's text: a regular file only (a FIFO or a device is never waited on: the
    open does not block), at most MAX_CONFIG_BYTES."""
    from bob_acp.files.atomic import NotRegular, open_regular, read_up_to

    try:
        with open_regular(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > MAX_CONFIG_BYTES:
                raise ConfigUnreadable(f"config file {path}: {size} bytes, more than a config file may have "
                                       f"({MAX_CONFIG_BYTES // 1024} KiB): not read")
            data = read_up_to(handle, MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(f"config file {path}: not found") from None
    except NotRegular as exc:
        raise ConfigUnreadable(f"config file {path}: not a regular file ({exc}): not read") from None
    except OSError as exc:
        raise ConfigUnreadable(f"config file {path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigUnreadable(f"config file {path}: more than {MAX_CONFIG_BYTES // 1024} KiB: not read")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path}: not UTF-8 (byte {exc.start})") from None


def read_yaml(path: str, max_depth: int = MAX_DEPTH, max_values: int = MAX_VALUES) -> dict[str, Any]:
    """A bounded YAML file of keys (the configuration, the project rules), read as data."""
    text = read_text(path)
    try:
        data = _pyyaml(path, text)
    except RecursionError:
        raise ConfigError(f"config file {path}: nested deeper than {max_depth} levels") from None
    problem = shape_problem(data, max_depth, max_values)
    if problem:
        raise ConfigError(f"config file {path}: {problem}")
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: the top level must be a mapping of keys")
    return data


def shape_problem(data: object, max_depth: int, max_values: int) -> str | None:
    """Why `data` is too deep, too large or circular, or None. YAML aliases make one value stand
    in many places: each is measured once (its depth and the number of values it expands to),
    so an alias bomb is refused in microseconds, never expanded."""
    depth: dict[int, int] = {}
    size: dict[int, int] = {}
    open_now: set[int] = set()
    stack: list[tuple[object, bool]] = [(data, False)]
    while stack:
        node, done = stack.pop()
        if not isinstance(node, (dict, list)) or (not done and id(node) in depth):
            continue
        children = [c for c in (node.values() if isinstance(node, dict) else node) if isinstance(c, (dict, list))]
        if not done:
            if id(node) in open_now:
                return "a value refers to itself (YAML aliases)"
            open_now.add(id(node))
            stack.append((node, True))
            stack.extend((child, False) for child in children)
            continue
        open_now.discard(id(node))
        depth[id(node)] = 1 + max((depth[id(c)] for c in children), default=0)
        if depth[id(node)] > max_depth:
            return f"nested deeper than {max_depth} levels"
        size[id(node)] = min(max_values + 1, len(node) + sum(size[id(c)] for c in children))
    if isinstance(data, (dict, list)) and size[id(data)] > max_values:
        return f"holds more than {max_values} values once its YAML aliases are expanded"
    return None


def _pyyaml(path: str, text: str) -> Any:
    import yaml  # lazy: a start-up without a config file does not pay for it (~25 ms)

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" at line {where.line + 1}" if where else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(f"config file {path}: invalid YAML{line}: {problem}") from None


def _build(schema: dict[str, Any], raw: object, prefix: str, source: str, base_dir: str) -> dict[str, Any]:
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


def _check(spec: Key, value: object, dotted: str, source: str, base_dir: str) -> Any:
    def fail(problem: str) -> ConfigError:
        return ConfigError(f"config key '{dotted}' in {source}: {problem}, got {_shown(value)}")

    if value is None:
        if spec.nullable:
            return None
        raise fail("must not be null")
    if spec.kind == "enum":
        if value is False and "off" in spec.choices:
            value = "off"  # (YAML 1.1, as PyYAML reads it, takes an unquoted off for false)
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
        value = [_resolve(v, base_dir) for v in value] if isinstance(value, list) else _resolve(str(value), base_dir)
    return value


def _resolve(path: str, base_dir: str) -> str:
    return os.path.normpath(os.path.join(base_dir, os.path.expanduser(path)))


def defaults(profile: str | None = None) -> Config:
    """The built-in defaults alone, of a profile (tests, and a Bob whose config file is broken)."""
    return load(env={"XDG_CONFIG_HOME": "/nonexistent-bob-config"}, profile=profile)


# ---- the configuration reference -------------------------------------------------------------------

REFERENCE_WIDTH = 116
COMMENT_COLUMN = 28


def reference() -> str:
    """The configuration reference (docs/configuration.md): every key with its default, its
    documentation, and its value in the full profile, as YAML a user can copy."""
    lines: list[str] = []
    _reference(Config, "", lines)
    return "\n".join(lines) + "\n"


def _reference(cls: type, indent: str, lines: list[str]) -> None:
    for name, spec in declared(cls).items():
        if isinstance(spec, SectionRef):
            _commented(lines, f"{indent}{name}:", spec.doc)
            _reference(spec.cls, indent + "  ", lines)
            continue
        doc = spec.doc
        if spec.full is not None:
            doc += f" [full profile: {_yaml(spec.full)}]"
        if spec.env:
            doc += f" [${spec.env} overrides it]"
        _commented(lines, f"{indent}{name}: {_yaml(spec.default)}", doc)


def _commented(lines: list[str], text: str, doc: str) -> None:
    import textwrap

    if not doc:
        lines.append(text)
        return
    if len(text) + 2 > COMMENT_COLUMN + 24:  # (a long default: its words above it, not squeezed beside it)
        indent = text[:len(text) - len(text.lstrip())]
        first, *rest = textwrap.wrap(doc, REFERENCE_WIDTH - len(indent) - 4) or [""]
        lines.append(f"{indent}# {first}")
        lines.extend(f"{indent}#   {more}" for more in rest)
        lines.append(text)
        return
    column = max(COMMENT_COLUMN, len(text) + 2)
    first, *rest = textwrap.wrap(doc, REFERENCE_WIDTH - column - 2) or [""]
    lines.append(f"{text.ljust(column)}# {first}")
    lines.extend(f"{' ' * column}#   {more}" for more in rest)


def _yaml(value: object) -> str:
    import json

    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        plain = value and not value[0] in "*&!|>'\"%@`{[#-?:" and ": " not in value and " #" not in value
        # (YAML 1.1, as PyYAML reads it, takes on/off/yes/no for booleans)
        special = value.lower() in ("null", "true", "false", "on", "off", "yes", "no", "y", "n", "~")
        return value if plain and not special else json.dumps(value)
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)
