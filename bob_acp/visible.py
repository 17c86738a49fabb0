"""Text from the agent, the model, a tool or a file, made safe to write to a terminal.

Whatever such a text holds, the terminal must show it and never obey it: an ESC would start a
control sequence (a line cleared, the cursor moved, an OSC that sets the clipboard or the window
title), a carriage return would let a command hide behind the text drawn over it, and a bidi
override or a line separator can make a command read as another. So every C0 and C1 control,
DEL, and the Unicode format and separator characters that reorder or break a line are shown as
visible marks: `␛` for ESC, `^X` for the other C0 controls, `<U+XXXX>` for the rest. Newlines
and tabs stay only inside bodies of output (`body`); a title or a question is one line, its
newlines shown as `⏎`. The chat's own colours are added after this, never before.
"""

from __future__ import annotations

import re

_ALWAYS = r"\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u115f\u1160\u180e\u200b\u200e\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb"
_BODY = re.compile(f"[{_ALWAYS}]")
_LINE = re.compile(f"[{_ALWAYS}\\t\\n]")


def _mark(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if char == "\x1b":
        return "␛"
    if char == "\n":
        return "⏎"
    if char == "\t":
        return "⇥"
    if code < 0x20:
        return "^" + chr(code + 0x40)
    if code == 0x7F:
        return "^?"
    return f"<U+{code:04X}>"


def body(text: str) -> str:
    """A multi-line text (model answer, output, file content): newlines and tabs kept; a CRLF
    line end is a line end; every other control made visible."""
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    return _BODY.sub(_mark, text) if _BODY.search(text) else text


def line(text: str) -> str:
    """One line (a title, a question, a path): newlines and tabs made visible too."""
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    return _LINE.sub(_mark, text) if _LINE.search(text) else text


def is_clean(text: str) -> bool:
    """True when `text` holds nothing `line` would mark."""
    return _LINE.search(text) is None
