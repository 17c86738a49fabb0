"""Skills: folders with a SKILL.md (the Agent Skills format), found, validated and listed.

Search order, later places overriding earlier ones of the same name: the skills shipped with
Bob, ~/.config/bob/skills, <cwd>/.bob/skills, then each of skills.dirs. A broken skill is
skipped with a warning, never an exception.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

NAME_RE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
MAX_NAME = 64
MAX_DESCRIPTION = 1024
RESERVED = ("new", "compact")  # slash commands intercepted by session/prompt
SKILL_HINT = "parameters, if this skill needs any"
BUILTIN_COMMANDS = [
    {"name": "new", "description": "Clear the history and start a new session"},
    {"name": "compact", "description": "Compress the history now, keeping the last turns"},
]


@dataclass
class Skill:
    name: str
    description: str
    folder: str
    instructions: str
    files: list[str] = field(default_factory=list)
    source: str = ""


@dataclass
class Catalog:
    skills: dict[str, Skill] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def commands(self) -> list[Skill]:
        return [s for s in self.skills.values() if s.name not in RESERVED]


def shipped_dir() -> str:
    from bob_acp import shipped_skills

    return os.path.dirname(os.path.abspath(shipped_skills.__file__))


def search_path(cwd: str, cfg: Any, env: dict | None = None) -> list[tuple[str, str]]:
    env = os.environ if env is None else env
    config_home = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    places = [("shipped", shipped_dir()), ("user", os.path.join(config_home, "bob", "skills")),
              ("project", os.path.join(cwd, ".bob", "skills"))]
    return places + [("skills.dirs", d) for d in cfg.skills.dirs]


def discover(cwd: str, cfg: Any, env: dict | None = None) -> Catalog:
    found: dict[str, Skill] = {}
    warnings: list[str] = []
    for source, folder in search_path(cwd, cfg, env):
        try:
            entries = sorted(os.listdir(folder))
        except OSError:
            continue  # a place with no skills folder is fine
        for entry in entries:
            path = os.path.join(folder, entry)
            if entry.startswith((".", "_")) or not os.path.isdir(path):
                continue
            skill_md = os.path.join(path, "SKILL.md")
            if not os.path.isfile(skill_md):
                continue
            skill, problem = _parse(path, entry, skill_md, source)
            if problem:
                warnings.append(f"skill {skill_md} skipped: {problem}")
            else:
                found[skill.name] = skill
    for name in RESERVED:
        if name in found:
            warnings.append(f"skill '{name}' ({found[name].folder}) is not advertised: the /{name} command is "
                            "intercepted, so the menu could never reach it (use ${name} instead)")
    return Catalog(dict(sorted(found.items())), warnings)


def _parse(folder: str, dirname: str, skill_md: str, source: str) -> tuple[Skill | None, str | None]:
    import yaml

    try:
        with open(skill_md, "rb") as handle:
            text = handle.read().decode("utf-8")
    except OSError as exc:
        return None, f"cannot read: {exc.strerror}"
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
                 _files(folder), source), None


def _files(folder: str) -> list[str]:
    files = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
        for name in names:
            if name.startswith(".") or (root == folder and name == "SKILL.md"):
                continue
            files.append(os.path.join(root, name))
    return sorted(files)


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
