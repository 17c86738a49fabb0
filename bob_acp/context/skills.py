"""Skills: folders with a SKILL.md (the Agent Skills format), found, validated and listed.

Search order, later places overriding earlier ones of the same name: the skills shipped with
Bob, ~/.config/bob/skills, <cwd>/.bob/skills, then each of skills.dirs. A broken skill is
skipped with a warning, never an exception. Nothing is kept between two looks: a skill changed
any way (a hard link, a bind mount, a file system mounted since) is as it is now.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from bob_acp.jsontext import clean

if TYPE_CHECKING:
    from bob_acp.config import Config

NAME_RE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_SKILL_MD = 1024 * 1024
RESERVED = ("new", "compact")  # slash commands intercepted by session/prompt
SKILL_HINT = "parameters, if this skill needs any"
BUILTIN_COMMANDS: list[dict[str, Any]] = [
    {"name": "new", "description": "Clear the history and start a new session"},
    {"name": "compact", "description": "Compress the history now, keeping the last turns"},
]
RULES_COMMANDS: list[dict[str, Any]] = [  # (permissions.projectRules)
    {"name": "rules", "description": "This project's rules: what Bob always and never does here (/rules forget N "
                                     "removes one)", "input": {"hint": "forget N, to remove rule N"}},
]
UNDO_COMMANDS: list[dict[str, Any]] = [  # (tools.checkpoints)
    {"name": "undo", "description": "Take back the last turn that changed files: its changes and its messages"},
    {"name": "redo", "description": "Put back what the last /undo took"},
]


MAX_LISTED_FILES = 100  # files read_skill lists; the rest are counted
MAX_COUNTED_FILES = 10000  # the count stops here (a node_modules/ inside a skill)


@dataclass
class Skill:
    name: str
    description: str
    folder: str
    instructions: str
    listed: list[str] | None = None  # the files, when given; else looked up at each use
    source: str = ""
    more: int = 0  # files beyond the listed ones (a lower bound when it reached the counting cap)

    @property
    def files(self) -> list[str]:
        """Absolute paths of the skill's own files (SKILL.md and dot files left out), at most
        MAX_LISTED_FILES of them, the folder's top level first; looked up when asked for, so a
        script added to the folder is listed."""
        if self.listed is not None:
            return self.listed
        found, self.more = _files(self.folder)
        if self.source == "project":  # a link out of the project is not the skill's own file
            found = [path for path in found if _within(os.path.realpath(path), os.path.realpath(self.folder))]
        return found


@dataclass
class Catalog:
    skills: dict[str, Skill] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    text: str | None = None  # catalogue_text, made once

    def commands(self) -> list[Skill]:
        return [s for s in self.skills.values() if s.name not in RESERVED]


def shipped_dir() -> str:
    try:
        from bob_acp import shipped_skills  # type: ignore[attr-defined]  # made by the wheel's build
    except ImportError:  # the source tree itself (not installed): skills/ beside the package
        package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # (this file: bob_acp/context/)
        return os.path.join(os.path.dirname(package), "skills")
    return os.path.dirname(os.path.abspath(shipped_skills.__file__))


def search_path(cwd: str, cfg: Config, env: Mapping[str, str] | None = None,
                more: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """Later places win a name: the further roots' project skills come before the session
    folder's own, so its own win."""
    variables = os.environ if env is None else env
    config_home = variables.get("XDG_CONFIG_HOME") or os.path.join(variables.get("HOME") or os.path.expanduser("~"),
                                                                    ".config")
    places = [("shipped", shipped_dir()), ("user", os.path.join(config_home, "bob", "skills"))]
    places += [("project", os.path.join(root, ".bob", "skills")) for root in (*reversed(more), cwd)]
    return places + [("skills.dirs", d) for d in cfg.skills.dirs]


def discover(cwd: str, cfg: Config, env: Mapping[str, str] | None = None, more: tuple[str, ...] = ()) -> Catalog:
    """The skills of these places as they are now: read at every call (a skill added, changed
    or removed, however it was, is in the next session), a few stats and small reads."""
    found: dict[str, Skill] = {}
    warnings: list[str] = []
    for source, folder in search_path(cwd, cfg, env, more):
        for skill, problem in _place(folder, source):
            if problem:
                warnings.append(problem)
            elif skill is not None:
                found[skill.name] = skill
    for name in RESERVED:
        if name in found:
            warnings.append(f"skill '{name}' ({clean(found[name].folder)}) is not advertised: the /{name} command is "
                            "intercepted, so the menu could never reach it (use ${name} instead)")
    return Catalog(dict(sorted(found.items())), warnings)


def _place(folder: str, source: str) -> list[tuple[Skill | None, str | None]]:
    try:
        entries = sorted(e for e in os.listdir(folder) if not e.startswith((".", "_")))
    except OSError:
        return []  # a place with no skills folder is fine
    results: list[tuple[Skill | None, str | None]] = []
    for entry in entries:
        path = os.path.join(folder, entry)
        skill_md = os.path.join(path, "SKILL.md")
        try:
            if not stat.S_ISREG(os.stat(skill_md).st_mode):
                continue
        except OSError:
            continue  # not a skill folder (or a file)
        skill, problem = _parse(path, entry, skill_md, source)
        results.append((skill, f"skill {clean(skill_md)} skipped: {problem}" if problem else None))
    return results


def _parse(folder: str, dirname: str, skill_md: str, source: str) -> tuple[Skill | None, str | None]:
    import yaml

    from bob_acp.files.atomic import read_regular

    if source == "project" and not _inside_project(folder, skill_md):
        return None, "it or its folder links outside the project (project skills are read only from inside it)"
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
    try:  # (libyaml's parser where PyYAML has it: every session/new reads every SKILL.md)
        meta = yaml.load(match.group(1), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        return None, "invalid YAML front matter" + (f" at line {mark.line + 2}" if mark else "")
    except RecursionError:
        return None, "invalid YAML front matter: nested too deep"
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


def _within(path: str, folder: str) -> bool:
    return path.startswith(folder.rstrip(os.sep) + os.sep)


def _inside_project(folder: str, skill_md: str) -> bool:
    """A project skill (<project>/.bob/skills/<name>/SKILL.md): its SKILL.md, links followed,
    inside its own folder, and that folder inside the project, as AGENTS.md is read."""
    project = os.path.realpath(os.path.dirname(os.path.dirname(os.path.dirname(folder))))
    real_folder = os.path.realpath(folder)
    return _within(real_folder, project) and _within(os.path.realpath(skill_md), real_folder)


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
    if catalog.text is None:
        catalog.text = _catalogue_text(catalog)
    return catalog.text


def _catalogue_text(catalog: Catalog) -> str:
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


def available_commands(catalog: Catalog, undo: bool = False, rules: bool = False) -> list[dict[str, Any]]:
    """The slash menu: Bob's own commands (/undo and /redo with checkpoints, /rules with project
    rules), then the skills (one named as a command of Bob's is left out: the command wins)."""
    commands = [dict(c) for c in BUILTIN_COMMANDS + (UNDO_COMMANDS if undo else []) + (RULES_COMMANDS if rules else [])]
    taken = {c["name"] for c in commands}
    commands += [{"name": s.name, "description": s.description, "input": {"hint": SKILL_HINT}}
                 for s in catalog.commands() if s.name not in taken]
    return commands
