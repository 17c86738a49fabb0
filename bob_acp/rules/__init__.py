"""Project rules (permissions.projectRules): the user's remembered answers for one project,
"always" and "never", for a command's first words or for a file tool in a folder of the project.

What a rule covers is exact: a command is allowed by rules only when every simple command in it
is covered by one, nothing in it is beyond the parser (substitutions, groups, a redirection out
of the project or into .git, .bob or an AGENTS.md), and none runs another program given as its
arguments (`env`, `xargs`, `sh -c`); a "never" rule is looked for in every word of the command,
however it is wrapped or quoted, and wins over any allow, in every approval mode. The rules live in Bob's own state (rules/store.py),
never in the project."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from bob_acp.rules.shell import Word, loose_words, simple_commands

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    from bob_acp.files.workspace import Workspace

ALLOW, NEVER = "allow", "never"
FILE_TOOLS = ("read_file", "write_file", "edit_file")  # (the tools a folder rule can name)
# Programs that run another program named in their arguments: a rule for them would cover any.
WRAPPERS = frozenset({
    "env", "xargs", "sh", "bash", "zsh", "dash", "ksh", "fish", "csh", "tcsh", "sudo", "doas", "su", "nohup", "nice",
    "ionice", "timeout", "time", "exec", "eval", "command", "builtin", "watch", "setsid", "stdbuf", "chroot",
    "unshare", "nsenter", "flock", "strace", "ltrace", "gdb", "busybox", "parallel", "find", "chrt", "taskset",
    "script", "runuser", "sg", "newgrp", "firejail", "systemd-run", "ssh", ".", "source", "trap",
})
# Interpreters run whatever their arguments say: a rule for one keeps the whole command shown.
INTERPRETERS = frozenset({
    "python", "python2", "python3", "node", "nodejs", "ruby", "perl", "php", "deno", "bun", "lua", "luajit",
    "Rscript", "java", "pwsh", "powershell", "osascript", "awk", "gawk", "mawk", "sed", "tclsh", "julia", "irb",
    "pip", "pip3", "npx", "uvx", "pipx",
})
DEVICES = ("/dev/null", "/dev/stdout", "/dev/stderr")  # (what a redirection may name outside the project)
SUBCOMMAND = re.compile(r"[a-z][a-z0-9:_-]*")
MAX_RULE_WORDS = 32


@dataclass(frozen=True)
class Rule:
    decision: str  # ALLOW or NEVER
    tool: str  # "bash", or a file tool
    words: tuple[str, ...] = ()  # bash: the command's first words
    folder: str = ""  # a file tool: a folder of the project, relative to its top ("." for all of it)

    def shown(self) -> str:
        """The rule as the user reads it: "always `npm test …`", "never write_file in src/"."""
        word = "always" if self.decision == ALLOW else "never"
        if self.tool == "bash":
            return f"{word} `{' '.join(self.words)} …`"
        where = "the project" if self.folder == "." else f"{self.folder}/"
        return f"{word} {self.tool} in {where}"

    def covered(self) -> str:
        """What the rule covers, for a question's options: "`npm test …`", "write_file in src/"."""
        return self.shown().split(" ", 1)[1]

    def as_entry(self) -> dict[str, str]:
        """The rule as its file holds it."""
        entry = {self.decision: self.tool}
        if self.tool == "bash":
            entry["command"] = " ".join(self.words)
        else:
            entry["folder"] = self.folder
        return entry


def judge(rules: list[Rule], tool: str, arguments: dict[str, Any], ws: Workspace,
          allows: bool = True) -> tuple[str, list[Rule]] | None:
    """(NEVER, [the rule]) when a "never" rule covers the call; (ALLOW, [the rules used]) when
    allow rules cover all of it (`allows`: they may); None: the rules say nothing of it."""
    if tool == "bash":
        command = arguments.get("command")
        if not isinstance(command, str):
            return None
        loose = loose_words(command)
        for rule in rules:
            if rule.decision == NEVER and rule.tool == "bash" and _contains(loose, rule.words):
                return NEVER, [rule]
        if not allows:
            return None
        parts = simple_commands(command, _writable(ws))
        if not parts:
            return None
        used: list[Rule] = []
        for words in parts:
            covering = _covering(rules, words)
            if covering is None:
                return None
            if covering not in used:
                used.append(covering)
        return ALLOW, used
    if tool not in FILE_TOOLS:
        return None
    relative = _project_path(arguments, ws)
    if relative is None:
        return None
    found = [r for r in rules if r.tool == tool and _under(relative, r.folder)]
    for rule in found:
        if rule.decision == NEVER:
            return NEVER, [rule]
    allowed = [r for r in found if r.decision == ALLOW]
    return (ALLOW, allowed[:1]) if allows and allowed else None


def proposal(tool: str, arguments: dict[str, Any], ws: Workspace) -> Rule | None:
    """The rule "always in this project" would keep for this call (its decision ALLOW: the
    question offers "never" with the same words), never wider than the call shown: a command's
    first word, and its second when it names a subcommand (`npm test`, `git status`), or the
    whole command of an interpreter; a file tool and the file's own folder. None: this call
    cannot be made a rule (several commands, a wrapper, what the parser refuses, a path outside
    the project)."""
    if tool == "bash":
        command = arguments.get("command")
        if not isinstance(command, str):
            return None
        parts = simple_commands(command, _writable(ws))
        if parts is None or len(parts) != 1:
            return None
        words = parts[0]
        first, literal = words[0]
        if not literal or first in WRAPPERS or os.path.basename(first) in WRAPPERS:
            return None
        if first in INTERPRETERS or os.path.basename(first) in INTERPRETERS:
            if not all(lit for _, lit in words) or len(words) > MAX_RULE_WORDS:
                return None
            return Rule(ALLOW, "bash", tuple(w for w, _ in words))
        if len(words) > 1 and words[1][1] and SUBCOMMAND.fullmatch(words[1][0]):
            return Rule(ALLOW, "bash", (first, words[1][0]))
        return Rule(ALLOW, "bash", (first,))
    if tool not in FILE_TOOLS:
        return None
    relative = _project_path(arguments, ws)
    if relative is None:
        return None
    return Rule(ALLOW, tool, folder=os.path.dirname(relative) or ".")


def _covering(rules: list[Rule], words: list[Word]) -> Rule | None:
    first = words[0][0]
    if first in WRAPPERS or os.path.basename(first) in WRAPPERS:
        return None  # (a wrapper runs what its arguments say: no rule covers it)
    for rule in rules:
        if rule.decision != ALLOW or rule.tool != "bash" or len(rule.words) > len(words):
            continue
        if all(literal and word == wanted for (word, literal), wanted in zip(words[:len(rule.words)], rule.words, strict=True)):
            return rule
    return None


def _contains(words: list[str], wanted: tuple[str, ...]) -> bool:
    size = len(wanted)
    return size > 0 and any(tuple(words[i:i + size]) == wanted for i in range(len(words) - size + 1))


def _project_path(arguments: dict[str, Any], ws: Workspace) -> str | None:
    """The call's path relative to the session's folder, links followed, when it lies in the
    folder and is a file the approval modes may touch (not under .git or .bob, no AGENTS.md);
    None otherwise."""
    path = arguments.get("path")
    if not isinstance(path, str) or not path or "\0" in path or not ws.contains(path):
        return None
    real, root = os.path.realpath(ws.resolve(path)), os.path.realpath(ws.cwd)
    if not real.startswith(root.rstrip(os.sep) + os.sep):
        return None  # (a further folder of the session: rules are the session folder's)
    return os.path.relpath(real, root)


def _writable(ws: Workspace) -> Callable[[str], bool]:
    """inside(target) for a redirection of a command: a device that keeps nothing, or a file a
    file tool could write in the session's folder unasked (never under .git or .bob, no
    AGENTS.md: a hook git runs, the rules later sessions obey)."""
    def inside(target: str) -> bool:
        return target in DEVICES or _project_path({"path": target}, ws) is not None
    return inside


def _under(relative: str, folder: str) -> bool:
    return folder == "." or relative.startswith(folder.rstrip("/") + "/")
