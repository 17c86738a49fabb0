"""What `bob-acp setup` writes for the user (a key file, the config's `model:` section), and
what `logout` takes back of it.

A key file setup wrote is recorded by its path and identity (device and inode; never anything
of the key) in the user's state folder, so that logout forgets only a key Bob stored: a key
file the user made and named in `model.apiKeyFile`, or a key in the environment, is theirs,
and logout says so and leaves it."""

from __future__ import annotations

import json
import os
import re
import secrets
import stat
from typing import TYPE_CHECKING, Any

from bob_acp.files import bobdir
from bob_acp.files.atomic import atomic_write
from bob_acp.jsontext import mapping

if TYPE_CHECKING:
    from collections.abc import Mapping

    from bob_acp.config.schema import Config

RECORD = "setup-keys.json"
MODEL_KEYS = ("provider", "name", "baseUrl", "apiKeyFile", "apiKeyEnv")  # what setup sets of `model:`


class Unwritable(Exception):
    """The config file cannot be read to be updated (one line to the user)."""


def write_key(path: str, key: str, env: Mapping[str, str]) -> str:
    """The key alone in a file only its owner can read, written whole: a temp file of an
    unpredictable name made new in the key's own folder (O_EXCL | O_NOFOLLOW: never through a
    link someone put there), then renamed over the key file (a link there is replaced, not
    followed); then recorded as Bob's (what logout may forget). Returns what the user must be
    told ("" or why it could not be recorded: the key is in place all the same)."""
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    temp = os.path.join(folder, f".{os.path.basename(path)}.{secrets.token_hex(8)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, key.encode("utf-8") + b"\n")
            os.fsync(fd)
            made = os.fstat(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    records = [r for r in _records(env) if r.get("path") != path]
    try:
        _keep_records(env, records + [{"path": path, "dev": made.st_dev, "ino": made.st_ino}])
    except OSError as exc:
        return (f"the key file could not be recorded as bob-acp setup's ({exc.strerror or exc}): an editor's sign-out "
                "will leave it; remove it yourself to sign out")
    return ""


def write_model(path: str, model: dict[str, Any]) -> str:
    """The config file with setup's keys of its `model:` section set to `model` (None values
    left out); every other key of an existing file kept. Returns what the user must be told
    ("" or where the commented file as it was is kept)."""
    data, told = _read_for_update(path)
    section = mapping(data.get("model"))
    for name in MODEL_KEYS:
        section.pop(name, None)
    section.update({k: v for k, v in model.items() if v is not None})
    data["model"] = section
    _write(path, data)
    return told


def forget(cfg: Config, env: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """logout: the key setup stored for the configured model, removed (the file, its record and
    the config's `model.apiKeyFile`); (what was forgotten, what was left and why), in words."""
    from bob_acp.config import keys

    forgotten: list[str] = []
    kept: list[str] = []
    key_file = cfg.model.apiKeyFile
    if key_file:
        records = _records(env)
        record = next((r for r in records if r.get("path") == key_file), None)
        if record is not None and _remove_if(key_file, record):
            _keep_records(env, [r for r in records if r.get("path") != key_file])
            forgotten.append(f"the key bob-acp setup stored in {key_file}")
            if cfg.source:
                try:
                    data, told = _read_for_update(cfg.source)
                except Unwritable as exc:
                    kept.append(f"model.apiKeyFile in {cfg.source}, which names the removed file: {exc}")
                else:
                    section = mapping(data.get("model"))
                    written = section.get("apiKeyFile")
                    if isinstance(written, str) and _resolved(written, cfg.source) == key_file:
                        section.pop("apiKeyFile")
                        data["model"] = section
                        _write(cfg.source, data)
                        forgotten.append(f"model.apiKeyFile in {cfg.source}" + (f" ({told})" if told else ""))
        elif os.path.lexists(key_file):
            kept.append(f"the key file {key_file}: yours, not one bob-acp setup stored; left as it is")
    variable = keys.api_key_env(cfg)
    if variable and env.get(variable):
        kept.append(f"the key in the environment variable {variable}: the environment's, which Bob cannot change; "
                    "unset it where the editor starts Bob")
    return forgotten, kept


def _remove_if(path: str, record: dict[str, Any]) -> bool:
    """Remove `path` when it is still the file setup wrote (a regular file of the recorded
    identity), by its name in its folder's descriptor: never through a link put there since."""
    try:
        folder = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        name = os.path.basename(path)
        try:
            info = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except OSError:
            return False
        if not stat.S_ISREG(info.st_mode) or (info.st_dev, info.st_ino) != (record.get("dev"), record.get("ino")):
            return False
        os.unlink(name, dir_fd=folder)
        return True
    finally:
        os.close(folder)


def _resolved(written: str, config_path: str) -> str:
    """A path as the config file has it, as Bob reads it (relative to the file's folder)."""
    expanded = os.path.expanduser(written)
    return os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(config_path)), expanded))


def _read_for_update(path: str) -> tuple[dict[str, Any], str]:
    """(the config file's mapping, what the user must be told): a file with comments is kept as
    it was beside it (`.bak`), since a YAML writer keeps values, not comments."""
    import yaml

    if not os.path.exists(path):
        return {}, ""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        loaded = yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise Unwritable(f"cannot read {path} to update it: {exc}") from None
    told = ""
    if has_comments(text):
        atomic_write(path + ".bak", text.encode("utf-8"))
        told = f"{path} has comments, which rewriting it drops: the file as it was is kept in {path}.bak"
    return (loaded if isinstance(loaded, dict) else {}), told


def _write(path: str, data: dict[str, Any]) -> None:
    import yaml

    os.makedirs(os.path.dirname(path), exist_ok=True)
    atomic_write(path, yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode("utf-8"))


def has_comments(text: str) -> bool:
    """Whether a YAML text holds a comment (a `#` at a line's start or after a space, outside
    quotes as far as one line shows)."""
    for line in text.splitlines():
        unquoted = re.sub(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"", "", line)
        if unquoted.lstrip().startswith("#") or " #" in unquoted or "\t#" in unquoted:
            return True
    return False


def _records(env: Mapping[str, str]) -> list[dict[str, Any]]:
    try:
        with open(os.path.join(bobdir.user_state(env), RECORD), encoding="utf-8") as handle:
            found = json.load(handle)
    except (OSError, ValueError):
        return []
    return [r for r in found if isinstance(r, dict)] if isinstance(found, list) else []


def _keep_records(env: Mapping[str, str], records: list[dict[str, Any]]) -> None:
    folder = bobdir.user_state(env)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    atomic_write(os.path.join(folder, RECORD), json.dumps(records).encode("utf-8"), mode=0o600)
