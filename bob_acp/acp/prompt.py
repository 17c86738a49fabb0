"""Turning a session/prompt's content blocks into the one text the engine receives."""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import unquote, urlsplit

from bob_acp.jsontext import clean, decoded_size, text_or

# `@path` starts at a word boundary (so `bob@example.com` is no mention) and runs to the next
# white space; `@"path with spaces"` quotes a path.
_MENTION = re.compile(r'(?<![\w@])@(?:"([^"\n]+)"|(\S+))')
_TRAILING = ".,;:!?)]}'\""


IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
MAX_IMAGE_BYTES = 2 * 1024 * 1024  # decoded; its base64 (and a replay of it) stays within a frame


def image_problem(block: dict[str, Any]) -> str | None:
    """Why an image block cannot be given to the model, or None."""
    import base64
    import binascii

    kind, data = block.get("mimeType"), block.get("data")
    if kind not in IMAGE_TYPES:
        return f"mimeType must be one of {', '.join(IMAGE_TYPES)}, got {str(kind)[:60]!r}"
    if not isinstance(data, str) or not data:
        return "data must be the image in base64"
    if decoded_size(data) > MAX_IMAGE_BYTES:
        return f"the image is larger than {MAX_IMAGE_BYTES // (1024 * 1024)} MiB"
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return "data is not valid base64"
    return None


def refusal(blocks: list[Any], embedded: bool, pictures: bool) -> str | None:
    """Why a prompt is refused, naming its block, or None. Only with the opt-in prompt
    capabilities (acp.embeddedContext, acp.images); the default profile ignores what it does not
    take. An empty prompt (no block, or only empty text) is refused: there is nothing to ask."""
    if not blocks:
        return "prompt: empty (no content blocks): there is nothing to send to the model"
    if all(isinstance(b, dict) and b.get("type") == "text" and not str(b.get("text") or "").strip() for b in blocks):
        return "prompt: only empty text: there is nothing to send to the model"
    for index, block in enumerate(blocks):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "audio" and embedded:
            return f"prompt[{index}]: audio blocks are not supported by this agent (promptCapabilities.audio is false)"
        if kind == "image" and pictures:
            problem = image_problem(block)
            if problem:
                return f"prompt[{index}]: image: {problem}"
    return None


def images(blocks: list[Any]) -> list[dict[str, Any]]:
    """The prompt's image blocks, as the history keeps them ({mimeType, data}; checked already)."""
    return [{"mimeType": b["mimeType"], "data": b["data"]} for b in blocks
            if isinstance(b, dict) and b.get("type") == "image"]


def flatten(blocks: list[Any], embedded: bool = False, cap: int = 262144) -> str:
    """Text blocks concatenated; a resource_link becomes an attached-file line; with `embedded`
    (acp.embeddedContext), a resource block is given with its URI and its text (within `cap`
    bytes, saying what was cut) or, for a blob, its URI, type and size; others ignored.
    Two texts are joined as they are when either side of the join is white space (an editor
    that splits `fix `, a mention and ` please`), and with a newline otherwise, so the end of
    one block and the start of the next never make one word."""
    parts: list[str] = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            text = block["text"]
            if parts and text and parts[-1] and not parts[-1][-1].isspace() and not text[0].isspace():
                parts.append("\n")
            parts.append(text)
        elif kind == "resource_link" and isinstance(block.get("uri"), str):
            parts.append(f"\n[attached file: {link_text(block['uri'])}]")
        elif kind == "resource" and embedded and isinstance(block.get("resource"), dict):
            parts.append(embedded_text(block["resource"], cap))
    return "".join(parts)


def embedded_text(resource: dict[str, Any], cap: int) -> str:
    """An embedded resource as the model reads it (how Zed sends an @-mentioned file or a
    selection, unsaved edits included)."""
    uri = text_or(resource.get("uri"), "(no URI)")
    where = clean(link_text(uri))
    text = resource.get("text")
    if isinstance(text, str):
        data = text.encode("utf-8", "surrogatepass")
        note = ""
        if len(data) > cap:
            text = data[:cap].decode("utf-8", "ignore")
            note = f"\n[cut at {cap} bytes of {len(data)}; read the rest with read_file or bash]"
        body = clean(text)
        return f"\n[attached resource: {where}]\n{body}{'' if body.endswith(chr(10)) else chr(10)}{note}"
    size = decoded_size(text_or(resource.get("blob")))
    kind = text_or(resource.get("mimeType"), "unknown type")
    return f"\n[attached resource: {where} ({clean(kind)}, about {size} bytes), not shown]"


_LINES = re.compile(r"L(\d+)(?:[:-]L?(\d+))?")


def link_text(uri: str) -> str:
    """What an attached link says: a `file` URI as its decoded path (`%20` is a space), a line
    fragment (`#L2:3`, `#L5`, `#L2-L9`, as Zed and others send a selection) said after it; any
    other URI as written (the product document's form)."""
    if not uri.startswith("file://"):
        return uri
    try:
        parts = urlsplit(uri)
    except ValueError:
        return uri[len("file://"):]
    path = unquote(parts.path)
    if parts.netloc and parts.netloc != "localhost":
        path = f"//{parts.netloc}{path}"
    lines = _LINES.fullmatch(parts.fragment or "")
    if not lines:
        return path
    first, last = lines.group(1), lines.group(2)
    return f"{path} (line {first})" if not last or last == first else f"{path} (lines {first}-{last})"


def attachments(text: str, cwd: str) -> list[tuple[str, str, str]]:
    """(as written, absolute path, "file" | "directory") for each distinct `@path` that exists."""
    found: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    for match in _MENTION.finditer(text):
        written = match.group(1) or match.group(2)
        resolved = _resolve(written, cwd)
        if resolved is None and match.group(2):
            trimmed = written.rstrip(_TRAILING)
            if trimmed and trimmed != written:
                written, resolved = trimmed, _resolve(trimmed, cwd)
        if resolved is None or resolved[0] in seen:
            continue
        seen.add(resolved[0])
        found.append((written, resolved[0], resolved[1]))
    return found


def _resolve(written: str, cwd: str) -> tuple[str, str] | None:
    try:
        path = os.path.normpath(os.path.join(cwd, os.path.expanduser(written)))
        if os.path.isdir(path):
            return path, "directory"
        if os.path.exists(path):
            return path, "file"
    except (OSError, ValueError):  # a NUL byte or an over-long name is simply no path
        return None
    return None


def with_attachments(text: str, found: list[tuple[str, str, str]]) -> str:
    return text + "".join(f"\n[attached {kind}: {clean(path)}]" for _, path, kind in found)
