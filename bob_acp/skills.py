"""Skills: folders with a SKILL.md (the Agent Skills format), found, validated and listed.

Search order, later places overriding earlier ones of the same name: the skills shipped with
Bob, ~/.config/bob/skills, <cwd>/.bob/skills, then each of skills.dirs. A broken skill is
skipped with a warning, never an exception.
"""

from __future__ import annotations

import os
import re
import stat
import threading
from dataclasses import dataclass, field
from typing import Any

from bob_acp.jsonrpc.codec import clean

NAME_RE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_SKILL_MD = 1024 * 1024
RESERVED = ("new", "compact")  # slash commands intercepted by session/prompt
SKILL_HINT = "parameters, if this skill needs any"
BUILTIN_COMMANDS = [
    {"name": "new", "description": "Clear the history and start a new session"},
    {"name": "compact", "description": "Compress the history now, keeping the last turns"},
]


MAX_LISTED_FILES = 100  # files read_skill lists; the rest are counted
MAX_COUNTED_FILES = 10000  # the count stops here (a node_modules/ inside a skill)


@dataclass
class Skill:
    name: str
    description: str
    folder: str
    instructions: str
    listed: list[str] | None = None  # the files, when given; else found on first use
    source: str = ""
    more: int = 0  # files beyond the listed ones (a lower bound when it reached the counting cap)

    @property
    def files(self) -> list[str]:
        """Absolute paths of the skill's own files (SKILL.md and dot files left out), at most
        MAX_LISTED_FILES of them, the folder's top level first."""
        if self.listed is None:
            self.listed, self.more = _files(self.folder)
        return self.listed


@dataclass
class Catalog:
    skills: dict[str, Skill] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def commands(self) -> list[Skill]:
        return [s for s in self.skills.values() if s.name not in RESERVED]


def shipped_dir() -> str:
    try:
        from bob_acp import shipped_skills
    except ImportError:  # the source tree itself (not installed): skills/ beside the package
        return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "skills")
    return os.path.dirname(os.path.abspath(shipped_skills.__file__))


def search_path(cwd: str, cfg: Any, env: dict | None = None) -> list[tuple[str, str]]:
    env = os.environ if env is None else env
    config_home = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    places = [("shipped", shipped_dir()), ("user", os.path.join(config_home, "bob", "skills")),
              ("project", os.path.join(cwd, ".bob", "skills"))]
    return places + [("skills.dirs", d) for d in cfg.skills.dirs]


_cache: dict[str, tuple[tuple, list[tuple[Skill | None, str | None]]]] = {}
_cache_lock = threading.Lock()


def discover(cwd: str, cfg: Any, env: dict | None = None) -> Catalog:
    found: dict[str, Skill] = {}
    warnings: list[str] = []
    for source, folder in search_path(cwd, cfg, env):
        for skill, problem in _place(folder, source):
            if problem:
                warnings.append(problem)
            else:
                found[skill.name] = skill
    for name in RESERVED:
        if name in found:
            warnings.append(f"skill '{name}' ({clean(found[name].folder)}) is not advertised: the /{name} command is "
                            "intercepted, so the menu could never reach it (use ${name} instead)")
    return Catalog(dict(sorted(found.items())), warnings)


def _place(folder: str, source: str) -> list[tuple[Skill | None, str | None]]:
    """The skills of one place, parsed again only when a folder or a SKILL.md changed (the
    catalogue is read at every session/new; parsing YAML is what costs)."""
    signature = _signature(folder)
    if signature is None:
        return []  # a place with no skills folder is fine
    key = source + "\0" + folder
    with _cache_lock:
        cached = _cache.get(key)
    if cached is not None and cached[0] == signature:
        return cached[1]
    results = []
    for entry, _, _ in signature[1]:
        path = os.path.join(folder, entry)
        skill_md = os.path.join(path, "SKILL.md")
        skill, problem = _parse(path, entry, skill_md, source)
        results.append((skill, f"skill {clean(skill_md)} skipped: {problem}" if problem else None))
    with _cache_lock:
        _cache[key] = (signature, results)
    return results


def _signature(folder: str) -> tuple | None:
    """What a place's skills depend on: each skill folder's and SKILL.md's change times and size."""
    try:
        folder_stat = os.stat(folder)
        entries = sorted(os.listdir(folder))
    except OSError:
        return None
    parts = []
    for entry in entries:
        if entry.startswith((".", "_")):
            continue
        path = os.path.join(folder, entry)
        try:
            folder_info = os.stat(path)
            info = os.stat(os.path.join(path, "SKILL.md"))
        except OSError:
            continue
        if not stat.S_ISDIR(folder_info.st_mode) or not stat.S_ISREG(info.st_mode):
            continue
        parts.append((entry, folder_info.st_mtime_ns, (info.st_mtime_ns, info.st_size, info.st_ino)))
    return folder_stat.st_mtime_ns, tuple(parts)


def _parse(folder: str, dirname: str, skill_md: str, source: str) -> tuple[Skill | None, str | None]:
    import yaml

    from bob_acp.atomic import read_regular

    try:
        data, size = read_regular(skill_md, MAX_SKILL_MD)
        if size > MAX_SKILL_MD:
            return None, f"SKILL.md larger than {MAX_SKILL_MD} bytes"
        text = data.decode("utf-8")
    except OSError as exc:
        return None, f"cannot read: {exc.strerror or exc}"
    except UnicodeDecodeError:
        return None, "not UTF-8"
    text = text.lstrip("\ufeff")
    match = re.match(r"---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|$)", text, re.S)
    if not match:
        return None, "no YAML front matter between --- lines"
    try:
        meta = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        return None, "invalid YAML front matter" + (f" at line {mark.line + 2}" if mark else "")
    if not isinstance(meta, dict):
        return None, "front matter must be a mapping"
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not name:
        return None, "missing name"
    if len(name) > MAX_NAME or not NAME_RE.fullmatch(name):
        return None, f"invalid name {name!r}: lowercase letters, digits and single hyphens, at most {MAX_NAME}"
    if name != dirname:
        return None, f"name {name!r} differs from its folder {dirname!r}"
    if not isinstance(description, str) or not description.strip():
        return None, "missing description"
    if len(description) > MAX_DESCRIPTION:
        return None, f"description longer than {MAX_DESCRIPTION} characters"
    return Skill(name, " ".join(description.split()), folder, text[match.end():].strip() + "\n",
                 source=source), None


def _files(folder: str) -> tuple[list[str], int]:
    """(up to MAX_LISTED_FILES files, the number of further files), walked breadth first so the
    top level comes first, the walk itself bounded by MAX_COUNTED_FILES."""
    listed: list[str] = []
    seen = 0
    level = [folder]
    while level and seen < MAX_COUNTED_FILES:
        below = []
        for root in level:
            try:
                entries = sorted(os.scandir(root), key=lambda e: e.name)
            except OSError:
                continue
            for entry in entries:
                if entry.name.startswith(".") or entry.name == "__pycache__":
                    continue
                if entry.is_dir(follow_symlinks=False):
                    below.append(entry.path)
                    continue
                if root == folder and entry.name == "SKILL.md":
                    continue
                seen += 1
                if len(listed) < MAX_LISTED_FILES:
                    listed.append(entry.path)
                if seen >= MAX_COUNTED_FILES:
                    break
        level = below
    return listed, seen - len(listed)


def catalogue_text(catalog: Catalog) -> str:
    if not catalog.skills:
        return ""
    lines = ["Skills (procedures you can follow; call read_skill with the name to get the instructions "
             "before you use one). A user message starting with `$name` asks you to use skill `name` "
             "with the text after it as its parameters:"]
    lines += [f"- {s.name}: {s.description}" for s in catalog.skills.values()]
    return "\n".join(lines)


def rewrite_prompt(text: str, catalog: Catalog) -> str:
    """`/skill args` → `$skill args` for a known skill; anything else is left as typed."""
    stripped = text.lstrip()
    match = re.match(r"/([a-z0-9-]+)(?=\s|$)", stripped)
    if match and match.group(1) in catalog.skills and match.group(1) not in RESERVED:
        return "$" + stripped[1:]
    return text


def available_commands(catalog: Catalog) -> list[dict]:
    commands = [dict(c) for c in BUILTIN_COMMANDS]
    commands += [{"name": s.name, "description": s.description, "input": {"hint": SKILL_HINT}}
                 for s in catalog.commands()]
    return commands
