"""Where the rules live: one YAML file per project in Bob's own state folder
(`~/.local/state/bob/rules/`, which sandboxed commands cannot see), named by the project's real
path and naming the folder it was made for (its device and inode). Never in the project: a rules
file a repository ships grants nothing.

A file edited by hand is read as the configuration is (a regular file of at most 256 KiB, its
depth and size bounded), at every use: no cache that an edit could slip past (a "never" rule
added by hand holds at the next call; a read of 20 rules costs about 2.5 ms). A rule that cannot
be read is said, and while the file holds one, no "always" rule of it applies ("never" rules
still do). A project moved away, whose path now holds another folder, keeps its "never" rules
and none of its "always" ones, and says so. Two Bob processes adding rules at once lose neither: each change is
made under a lock on the folder, from the file as it is then, and written atomically.
"""

from __future__ import annotations

import hashlib
import os
import shlex

from bob_acp.config import read_yaml
from bob_acp.exceptions import ConfigError
from bob_acp.files import bobdir
from bob_acp.files.atomic import atomic_write
from bob_acp.rules import ALLOW, FILE_TOOLS, NEVER, Rule

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Mapping

MAX_RULES = 1000
HEADER = ("# Bob's rules for one project: `bob-acp rules` lists and changes them. Edited by hand, they\n"
          "# are read again at Bob's next question. allow or never: bash with the command's first words,\n"
          "# or read_file, write_file, edit_file with a folder of the project (. for all of it).\n")


class Kept:
    """A project's rules as read: the rules, the lines saying what could not be read, and why
    its "always" rules do not apply (`doubt`), when they do not."""

    __slots__ = ("project", "rules", "problems", "moved", "path", "identity")

    def __init__(self, project: str, path: str, rules: list[Rule] | None = None, problems: list[str] | None = None):
        self.project, self.path = project, path
        self.rules = rules or []
        self.problems = problems or []
        self.identity: tuple[int, int] | None = None  # the folder the file was made for (device, inode)
        self.moved = False  # that folder is no longer at the project's path

    @property
    def doubt(self) -> str:
        if self.moved:
            return (f"the rules kept for {self.project} were made for a folder that is no longer there (moved, or "
                    "replaced by another): their \"always\" rules do not apply; `bob-acp rules` shows them")
        if self.problems:
            return f"{self.path}: {self.problems[0]}: its \"always\" rules do not apply until it is fixed"
        return ""

    def usable(self) -> list[Rule]:
        """The rules that apply: all of them, or its "never" rules alone while in doubt."""
        return [r for r in self.rules if r.decision == NEVER or not self.doubt]


class Store:
    def __init__(self, env: Mapping[str, str] | None = None):
        self.folder = os.path.join(bobdir.user_state(env), "rules")

    def path_of(self, project: str) -> str:
        real = os.path.realpath(project)
        name = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:32]
        return os.path.join(self.folder, f"{name}.yaml")

    def load(self, project: str) -> Kept:
        """The project's rules as its file is now."""
        real = os.path.realpath(project)
        path = self.path_of(real)
        try:
            os.stat(path)
        except FileNotFoundError:
            return Kept(real, path)
        except OSError as exc:
            return Kept(real, path, problems=[f"cannot be read: {exc.strerror or exc}"])
        kept = self._read(real, path)
        kept.moved = kept.identity is not None and _identity(real) != kept.identity
        return kept

    def _read(self, project: str, path: str) -> Kept:
        kept = Kept(project, path)
        try:
            data = _read(path)
        except ConfigError as exc:
            kept.problems.append(str(exc).removeprefix(f"config file {path}: "))
            return kept
        if data.get("project") not in (None, project):
            kept.problems.append(f"it names another project ({data.get('project')!r})")
        entries = data.get("rules") or []
        if not isinstance(entries, list):
            kept.problems.append("rules: must be a list")
            entries = []
        for number, entry in enumerate(entries[:MAX_RULES], 1):
            rule = parse(entry)
            if isinstance(rule, str):
                kept.problems.append(f"rule {number}: {rule}")
            else:
                kept.rules.append(rule)
        if len(entries) > MAX_RULES:
            kept.problems.append(f"more than {MAX_RULES} rules: the rest are not read")
        kept.identity = _identity_of(data.get("folder"))
        return kept

    # ---- changes ------------------------------------------------------------------------------------

    def add(self, project: str, rule: Rule) -> bool:
        """Keep `rule` for the project (False: it was kept already). OSError when it cannot be
        written; a file that cannot be read is never overwritten (RulesError)."""
        return self._change(project, lambda rules: None if rule in rules else [*rules, rule], adding=True)

    def remove(self, project: str, number: int) -> Rule:
        """Forget the project's rule `number` (from 1, as listed). RulesError when there is none."""
        removed: list[Rule] = []

        def without(rules: list[Rule]) -> list[Rule]:
            if not 1 <= number <= len(rules):
                raise RulesError(f"there is no rule {number} (the project has {len(rules)})")
            removed.append(rules[number - 1])
            return rules[:number - 1] + rules[number:]
        self._change(project, without)
        return removed[0]

    def _change(self, project: str, change: Any, adding: bool = False) -> bool:
        import fcntl

        real = os.path.realpath(project)
        os.makedirs(self.folder, mode=0o700, exist_ok=True)
        fd = os.open(os.path.join(self.folder, ".lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # (one owner at a time: the file as it is now, changed, written)
            path = self.path_of(real)
            kept = self.load(real)
            if kept.problems:
                raise RulesError(f"{path}: {kept.problems[0]}: fix or remove it first (it is not overwritten)")
            # A rule added for a project whose folder was replaced starts its "always" rules
            # afresh (they were another folder's); its "never" rules stay. (A removal counts the
            # rules as they are listed.)
            rules = change([r for r in kept.rules if r.decision == NEVER or not (kept.moved and adding)])
            if rules is None:
                return False
            # (a project moved away and its path reused: the rules it keeps from now on are this folder's)
            identity = kept.identity if kept.identity is not None and not (kept.moved and adding) else _identity(real)
            atomic_write(path, render(real, identity, rules).encode("utf-8"), mode=0o600)
            return True
        finally:
            os.close(fd)

    def everything(self) -> list[Kept]:
        """Every project's rules (`bob-acp rules --all`)."""
        found = []
        try:
            names = sorted(os.listdir(self.folder))
        except OSError:
            return []
        for name in names:
            if not name.endswith(".yaml"):
                continue
            path = os.path.join(self.folder, name)
            try:
                project = _read(path).get("project")
            except ConfigError:
                project = None
            if isinstance(project, str) and self.path_of(project) == path:
                found.append(self.load(project))
            else:
                found.append(Kept("(unknown project)", path, problems=["not a rules file Bob can read"]))
        return found


def listing(kept: Kept) -> list[str]:
    """The project's rules as numbered lines (what /rules and `bob-acp rules` show), then what is
    wrong with them."""
    lines = [f"  {number}. {rule.shown()}" for number, rule in enumerate(kept.rules, 1)]
    if kept.doubt:
        lines.append(f"  ⚠️ {kept.doubt}")
    lines += [f"  ⚠️ {problem}" for problem in kept.problems[1:]]
    return lines


class RulesError(Exception):
    """A change to the rules that cannot be made, in one line."""


def parse(entry: object) -> Rule | str:
    """A rule from its file's entry, or what is wrong with it."""
    if not isinstance(entry, dict):
        return "must be a mapping such as {allow: bash, command: npm test}"
    decisions = [d for d in (ALLOW, NEVER) if d in entry]
    if len(decisions) != 1:
        return "needs allow: or never: (one of them)"
    decision = decisions[0]
    tool = entry[decision]
    extra = set(entry) - {decision, "command", "folder"}
    if extra:
        return f"unknown key {sorted(extra)[0]!r}"
    if tool == "bash":
        command = entry.get("command")
        if not isinstance(command, str) or not command.strip() or "folder" in entry:
            return "a bash rule needs command: (the command's first words), and no folder"
        try:
            words = tuple(shlex.split(command))
        except ValueError as exc:
            return f"command: {exc}"
        if not words or any("\n" in w or "\0" in w for w in words):
            return "command: must be words on one line"
        return Rule(decision, "bash", words)
    if tool in FILE_TOOLS:
        folder = entry.get("folder")
        if not isinstance(folder, str) or not folder or "command" in entry:
            return f"a {tool} rule needs folder: (a folder of the project, . for all of it), and no command"
        folder = os.path.normpath(folder)
        if os.path.isabs(folder) or folder == ".." or folder.startswith("../") or "\0" in folder:
            return "folder: must be a folder inside the project, written from its top"
        return Rule(decision, tool, folder=folder)
    return f"{tool!r} is no tool a rule can name (bash, {', '.join(FILE_TOOLS)})"


def render(project: str, identity: tuple[int, int] | None, rules: list[Rule]) -> str:
    import yaml

    document: dict[str, Any] = {"project": project}
    if identity is not None:
        document["folder"] = {"device": identity[0], "inode": identity[1]}
    document["rules"] = [rule.as_entry() for rule in rules]
    return HEADER + yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=1000)


def _read(path: str) -> dict[str, Any]:
    """A rules file's keys (ConfigError, in the configuration's words, when it cannot be read),
    bounded tighter than the configuration: a few levels, a few values a rule."""
    return read_yaml(path, 8, MAX_RULES * 4 + 16)


def _identity(project: str) -> tuple[int, int] | None:
    try:
        info = os.stat(project)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _identity_of(folder: object) -> tuple[int, int] | None:
    if isinstance(folder, dict) and isinstance(folder.get("device"), int) and isinstance(folder.get("inode"), int):
        return folder["device"], folder["inode"]
    return None


