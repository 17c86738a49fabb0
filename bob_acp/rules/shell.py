"""A shell command read as a rule needs it: the simple commands it runs, each as its words, or
None when it does something a rule cannot vouch for (what Bob cannot parse is asked).

Only a plain list of simple commands is read: words (quoted or not), separated by `&&`, `||`,
`;`, `|`, `&` or a newline, with redirections. Refused (None): command or process substitution
(`$(…)`, backticks, `<(…)`), subshells and groups, here-documents, shell keywords (`if`, `for`,
functions), a leading variable assignment (`PATH=… npm test` runs another npm), and a
redirection to a file the caller's `inside` refuses (outside the project, or a protected name). A word that had a `$` expansion or a glob in it is
kept but marked not literal: it never matches a rule's word (an expansion can name anything).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

Word = tuple[str, bool]  # (its text once quotes are removed, whether it is that text whatever the shell does)

OPERATORS = ("&&", "||", ";", "|", "&", "\n")
KEYWORDS = {"if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac", "function",
            "select", "time", "!", "[[", "]]", "{", "}", "coproc"}
GLOB = set("*?[")


class _Unsafe(Exception):
    """Something no rule may vouch for."""


def simple_commands(command: str, inside: Callable[[str], bool]) -> list[list[Word]] | None:
    """The simple commands of `command`, each a list of words (redirections left out), or None.
    `inside(path)`: whether a redirection's target path (as written) stays in the project."""
    try:
        return _parse(command, inside)
    except _Unsafe:
        return None


def _parse(command: str, inside: Callable[[str], bool]) -> list[list[Word]]:
    commands: list[list[Word]] = []
    words: list[Word] = []
    redirect: str | None = None  # the operator waiting for its target word
    i, n = 0, len(command)

    def end_command() -> None:
        nonlocal words
        if redirect is not None:
            raise _Unsafe("a redirection without its target")
        if words:
            commands.append(words)
        words = []

    while i < n:
        c = command[i]
        if c in " \t":
            i += 1
            continue
        if c == "#" :  # a comment, to the end of the line
            while i < n and command[i] != "\n":
                i += 1
            continue
        two = command[i:i + 2]
        if two in ("&&", "||") or c in ";|\n" or (c == "&" and command[i + 1:i + 2] != ">"):
            if two == ";;" or two == "|&":
                raise _Unsafe(two)
            end_command()
            i += 2 if two in ("&&", "||") else 1
            continue
        if c in "()" or (c == "{" and not words):
            raise _Unsafe("a subshell or a group")
        if c in "<>" or (c.isdigit() and _redirection_at(command, i)) or (c == "&" and command[i + 1:i + 2] == ">"):
            if redirect is not None:
                raise _Unsafe("two redirections in a row")
            i, redirect = _redirection(command, i)
            continue
        word, literal, i = _word(command, i)
        if redirect is not None:
            redirect = None
            if not literal or not inside(word):
                raise _Unsafe(f"a redirection to {word}")
            continue
        if not words and (word in KEYWORDS and literal):
            raise _Unsafe(f"the keyword {word}")
        if not words and literal and "=" in word and word.split("=", 1)[0].isidentifier():
            raise _Unsafe("a variable assignment before the command")
        words.append((word, literal))
    end_command()
    return commands


def _redirection(command: str, i: int) -> tuple[int, str | None]:
    """(where the redirection operator at `i` ends, the operator when a file name follows it;
    None for a copy of a descriptor, such as 2>&1)."""
    n = len(command)
    j = i
    while j < n and command[j].isdigit():
        j += 1
    if command[j:j + 2] in ("<<", "<(", ">("):
        raise _Unsafe("a here-document or a process substitution")
    if command[j] == "&":  # &> and &>>: both outputs to a file
        j += 2
        if j < n and command[j] == ">":
            j += 1
        return j, command[i:j]
    j += 1
    if j < n and command[j] in ">|" and command[j - 1] == ">" or (command[j - 1] == "<" and j < n and command[j] == ">"):
        j += 1
    if j < n and command[j] == "&":  # >&2, <&0, >&-: a descriptor copied or closed, no file
        k = j + 1
        while k < n and (command[k].isdigit() or command[k] == "-"):
            k += 1
        if k > j + 1:
            return k, None
        return k, command[i:k]  # (>& file: bash's way of saying &>)
    return j, command[i:j]


def _redirection_at(command: str, i: int) -> bool:
    """Whether the digits at `i` are a descriptor number before a redirection (`2>`), not a word."""
    j = i
    while j < len(command) and command[j].isdigit():
        j += 1
    return j < len(command) and command[j] in "<>" and (i == 0 or command[i - 1] in " \t;&|\n")


def _word(command: str, i: int) -> tuple[str, bool, int]:
    """The word starting at `i`: its text with quotes removed, whether it is literal, where it ends."""
    out: list[str] = []
    literal = True
    n = len(command)
    while i < n and command[i] not in " \t\n;&|<>()":
        c = command[i]
        if c == "'":
            end = command.find("'", i + 1)
            if end < 0:
                raise _Unsafe("an unclosed quote")
            out.append(command[i + 1:end])
            i = end + 1
        elif c == '"':
            i += 1
            while i < n and command[i] != '"':
                if command[i] == "\\" and i + 1 < n and command[i + 1] in '$`"\\\n':
                    out.append(command[i + 1])
                    i += 2
                    continue
                if command[i] == "`" or command[i:i + 2] == "$(":
                    raise _Unsafe("a command substitution")
                if command[i] == "$":
                    literal = False
                out.append(command[i])
                i += 1
            if i >= n:
                raise _Unsafe("an unclosed quote")
            i += 1
        elif c == "\\":
            if i + 1 < n:
                out.append(command[i + 1])
            i += 2
        elif c == "`" or command[i:i + 2] == "$(":
            raise _Unsafe("a command substitution")
        else:
            if c == "$" or c in GLOB or (c == "~" and not out) or c in "{}":
                literal = False
            out.append(c)
            i += 1
    return "".join(out), literal, i


def loose_words(command: str) -> list[str]:
    """Every word of `command` wherever it stands (inside quotes, substitutions, `sh -c '…'`),
    quotes dropped: what a "never" rule is looked for in, so no wrapping hides a command."""
    import re

    text = re.sub(r"[\"'\\]", " ", command)
    return [w for w in re.split(r"[\s;&|()<>`$]+", text) if w]
