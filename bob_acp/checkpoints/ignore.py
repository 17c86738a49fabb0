"""The project's .gitignore rules, read by Bob itself (git is never run over the project's files:
a command could have planted a filter, a hook or a FIFO for it to trip on).

The rules are git's (gitignore(5)): blank lines and `#` comments skipped, `!` re-includes,
a trailing `/` matches folders only, a `/` at the start or in the middle anchors a pattern to
its file's folder (else it matches a name at any depth below), `*` and `?` never match `/`,
`**/`, `/**` and `/**/` span folders; the last rule that matches wins, a deeper file's over a
shallower one's, and nothing inside an ignored folder is looked at. The user's global excludes
and `.git/info/exclude` are not read (as before: Bob's store never read them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_RULES_BYTES = 1 << 20  # a .gitignore larger than this is not read (said as unreadable)


@dataclass(frozen=True)
class Rule:
    regex: re.Pattern[str]
    negated: bool
    folders_only: bool
    anchored: bool  # matched against the path from the file's folder, else against the name


class Rules:
    """The rules of one .gitignore, with a fast path when none re-includes: a name in a set, a
    suffix, or one combined expression, whatever order they came in."""

    def __init__(self, base: str, rules: list[Rule]):
        self.base = base  # the folder of the .gitignore, relative to the root ("" at the root)
        self.rules = rules
        self.ordered = any(rule.negated for rule in rules)
        self.names: dict[bool, frozenset[str]] = {}
        self.suffixes: dict[bool, tuple[str, ...]] = {}
        self.name_rx: dict[bool, re.Pattern[str] | None] = {}
        self.path_rx: dict[bool, re.Pattern[str] | None] = {}
        # whether any rule can match a file (False) or a folder (True): a look skips it otherwise
        self.applies = {folder: any(folder or not r.folders_only for r in rules) for folder in (False, True)}
        for folder in (False, True):
            usable = [r for r in rules if folder or not r.folders_only]
            names: set[str] = set()
            suffixes: list[str] = []
            by_name: list[str] = []
            by_path: list[str] = []
            for rule in usable:
                literal = _literal(rule.regex.pattern)
                if not rule.anchored and literal is not None:
                    names.add(literal)
                elif not rule.anchored and rule.regex.pattern.startswith("[^/]*") and \
                        _literal(rule.regex.pattern[5:]) is not None:
                    suffixes.append(_literal(rule.regex.pattern[5:]) or "")
                else:
                    (by_path if rule.anchored else by_name).append(rule.regex.pattern)
            self.names[folder] = frozenset(names)
            self.suffixes[folder] = tuple(suffixes)
            self.name_rx[folder] = re.compile("|".join(f"(?:{p})" for p in by_name), re.S) if by_name else None
            self.path_rx[folder] = re.compile("|".join(f"(?:{p})" for p in by_path), re.S) if by_path else None

    def decide(self, relative: str, name: str, folder: bool) -> bool | None:
        """True: ignored, False: re-included, None: no rule of this file says."""
        inside = relative[len(self.base) + 1:] if self.base else relative
        if self.ordered:
            for rule in reversed(self.rules):
                if rule.folders_only and not folder:
                    continue
                if rule.regex.fullmatch(inside if rule.anchored else name):
                    return not rule.negated
            return None
        if name in self.names[folder] or (self.suffixes[folder] and name.endswith(self.suffixes[folder])):
            return True
        by_name, by_path = self.name_rx[folder], self.path_rx[folder]
        if (by_name is not None and by_name.fullmatch(name)) or (by_path is not None and by_path.fullmatch(inside)):
            return True
        return None


def parse(text: str, base: str) -> Rules:
    """The rules of a .gitignore whose folder is `base` (relative to the root)."""
    rules = []
    for line in text.splitlines():
        line = _strip_trailing(line)
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        if negated:
            line = line[1:]
        elif line.startswith("\\!") or line.startswith("\\#"):
            line = line[1:]
        folders_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        anchored = "/" in line
        if line.startswith("/"):
            line = line[1:]
        elif line.startswith("**/"):
            anchored = True  # ("**/name" is "name" at any depth: as an anchored expression)
        try:
            regex = re.compile(translate(line), re.S)
        except re.error:
            continue  # (git ignores a pattern it cannot read too)
        rules.append(Rule(regex, negated, folders_only, anchored))
    return Rules(base, rules)


def translate(pattern: str) -> str:
    """A gitignore pattern as a regular expression over a path whose parts are split by `/`."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            j = i
            while j < n and pattern[j] == "*":
                j += 1
            stars = j - i
            at_start = i == 0 or pattern[i - 1] == "/"
            at_end = j == n or pattern[j] == "/"
            if stars >= 2 and at_start and at_end:
                if j == n:
                    out.append(".*")  # ("a/**": everything inside)
                else:
                    out.append("(?:.*/)?")  # ("**/" and "/**/": zero or more folders)
                    j += 1
            else:
                out.append("[^/]*")
            i = j
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            j = i + 1
            if j < n and pattern[j] in "!^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                out.append(re.escape(c))  # (no closing bracket: a literal one)
                i += 1
                continue
            body = pattern[i + 1:j]
            negate = body[:1] in ("!", "^")
            if negate:
                body = body[1:]
            body = body.replace("\\", "\\\\")
            out.append(f"(?!/)[^{body}]" if negate else f"(?!/)[{body}]")
            i = j + 1
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


def _strip_trailing(line: str) -> str:
    """Trailing spaces go, unless escaped with a backslash."""
    stripped = line.rstrip(" ")
    if stripped.endswith("\\") and len(stripped) < len(line):
        return stripped[:-1] + " "
    return stripped


def _literal(regex: str) -> str | None:
    """The text an expression made by `translate` matches when it has no wildcard, else None."""
    text, i = [], 0
    while i < len(regex):
        c = regex[i]
        if c == "\\" and i + 1 < len(regex):
            text.append(regex[i + 1])
            i += 2
        elif c in ".*+?[](){}|^$":
            return None
        else:
            text.append(c)
            i += 1
    return "".join(text)
