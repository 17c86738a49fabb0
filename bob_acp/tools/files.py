"""read_file, write_file, edit_file. Writes are atomic (temp file, fsync, rename)."""

from __future__ import annotations

import os
import threading

from bob_acp.atomic import atomic_write
from bob_acp.tools.base import Diff, Tool, ToolContext, ToolResult, run_in_worker


PATH_PARAMETER = {"type": "string", "description": "File path, relative to the working directory, absolute, or ~/…"}


def resolve(path: str, cwd: str) -> str:
    return os.path.normpath(os.path.join(cwd, os.path.expanduser(path)))


def _arg(args: dict, name: str, kind: type, required: bool = True):
    """The argument, or a ToolResult saying what is wrong with it."""
    if name not in args or args[name] is None:
        if required:
            return ToolResult(f"error: missing argument '{name}'", failed=True)
        return None
    value = args[name]
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        return ToolResult(f"error: argument '{name}' must be a whole number", failed=True)
    if kind is not int and not isinstance(value, kind):
        return ToolResult(f"error: argument '{name}' must be a {kind.__name__}", failed=True)
    if kind is str and required and name == "path" and not value:
        return ToolResult("error: argument 'path' must not be empty", failed=True)
    return value


def _read_text(path: str) -> str:
    with open(path, "rb") as handle:
        return handle.read().decode("utf-8", errors="replace")


class _FileTool(Tool):
    def title(self, args: dict) -> str:
        return f"{self.name}: {args.get('path', '')}"

    def locations(self, args: dict, cwd: str) -> list[str]:
        path = args.get("path")
        return [resolve(path, cwd)] if isinstance(path, str) and path and "\0" not in path else []

    def run(self, args: dict, ctx: ToolContext, cancel: threading.Event) -> ToolResult:
        return run_in_worker(lambda: self._guarded(args, ctx), cancel)

    def _guarded(self, args: dict, ctx: ToolContext) -> ToolResult:
        path = _arg(args, "path", str)
        if isinstance(path, ToolResult):
            return path
        if "\0" in path:
            return ToolResult("error: argument 'path' contains a NUL byte", failed=True)
        try:
            return self._work(args, resolve(path, ctx.cwd), ctx)
        except OSError as exc:
            return ToolResult(f"error: {exc.strerror or exc}: {resolve(path, ctx.cwd)}", failed=True)

    def _work(self, args: dict, path: str, ctx: ToolContext) -> ToolResult:
        raise NotImplementedError


class ReadFileTool(_FileTool):
    name = "read_file"
    kind = "read"
    description = (
        "Read a text file. `offset` is the first line to read (1-based) and `limit` the number of lines; "
        "without them the file is read from the start, up to a size cap (the result says when it was cut "
        "and how to read on)."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": PATH_PARAMETER,
            "offset": {"type": "integer", "description": "First line to read, 1-based."},
            "limit": {"type": "integer", "description": "Number of lines to read."},
        },
        "required": ["path"],
        "additionalProperties": False,
    }

    def _work(self, args: dict, path: str, ctx: ToolContext) -> ToolResult:
        offset = _arg(args, "offset", int, required=False)
        limit = _arg(args, "limit", int, required=False)
        for bad in (offset, limit):
            if isinstance(bad, ToolResult):
                return bad
        if os.path.isdir(path):
            return ToolResult(f"error: {path} is a directory (list it with bash: ls)", failed=True)
        cap = ctx.config.tools.maxReadBytes
        size = os.path.getsize(path)
        with open(path, "rb") as handle:
            if offset is None or offset <= 1:
                data = handle.read(cap + 1)
                first_line = 1
            else:
                data = _from_line(handle, offset, cap)
                first_line = offset
        if b"\0" in data[:8192]:
            return ToolResult(f"{path} is a binary file ({size} bytes); not shown", failed=True)
        lines = data[:cap].decode("utf-8", errors="replace").splitlines(keepends=True)
        if limit is not None and 0 <= limit < len(lines):
            shown = lines[:limit]
            note = f"\n[showing lines {first_line}–{first_line + limit - 1}; continue with offset {first_line + limit}]"
        elif len(data) > cap and len(lines) > 1:
            shown = lines[:-1]  # whole lines only, so the offset given continues exactly
            note = f"\n[cut at {cap} bytes of {size}; continue with offset {first_line + len(shown)}]"
        elif len(data) > cap:
            shown = lines
            note = f"\n[line {first_line} alone is longer than the {cap}-byte cap; read the rest with bash (e.g. cut, head -c)]"
        else:
            shown, note = lines, ""
        return ToolResult("".join(shown) + note)


def _from_line(handle, offset: int, cap: int) -> bytes:
    for _ in range(offset - 1):
        if not handle.readline():
            return b""
    return handle.read(cap + 1)


class WriteFileTool(_FileTool):
    name = "write_file"
    kind = "edit"
    description = "Create or overwrite a file with the given content (parent folders are created). The write is atomic."
    parameters = {
        "type": "object",
        "properties": {
            "path": PATH_PARAMETER,
            "content": {"type": "string", "description": "The whole new content of the file."},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    }

    def _work(self, args: dict, path: str, ctx: ToolContext) -> ToolResult:
        content = _arg(args, "content", str)
        if isinstance(content, ToolResult):
            return content
        if os.path.isdir(path):
            return ToolResult(f"error: {path} is a directory", failed=True)
        old = _read_text(path) if os.path.exists(path) else None
        atomic_write(path, content.encode("utf-8"))
        verb = "created" if old is None else "overwrote"
        return ToolResult(f"{verb} {path} ({len(content.encode('utf-8'))} bytes)", diff=Diff(path, old, content))


class EditFileTool(_FileTool):
    name = "edit_file"
    kind = "edit"
    description = (
        "Replace an exact piece of text in a file. `old_string` must appear exactly once (include enough "
        "surrounding lines to make it unique) unless `replace_all` is true. Read the file first. The write is atomic."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": PATH_PARAMETER,
            "old_string": {"type": "string", "description": "The exact text to replace."},
            "new_string": {"type": "string", "description": "The replacement text."},
            "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)."},
        },
        "required": ["path", "old_string", "new_string"],
        "additionalProperties": False,
    }

    def _work(self, args: dict, path: str, ctx: ToolContext) -> ToolResult:
        old_string = _arg(args, "old_string", str)
        new_string = _arg(args, "new_string", str)
        replace_all = _arg(args, "replace_all", bool, required=False) or False
        for value in (old_string, new_string, replace_all):
            if isinstance(value, ToolResult):
                return value
        if not old_string:
            return ToolResult("error: old_string is empty; use write_file to create or replace a whole file", failed=True)
        if not os.path.isfile(path):
            return ToolResult(f"error: no such file: {path} (use write_file to create it)", failed=True)
        old = _read_text(path)
        count = old.count(old_string)
        if count == 0:
            return ToolResult(f"error: old_string not found in {path}; read the file and copy the text exactly", failed=True)
        if count > 1 and not replace_all:
            return ToolResult(f"error: old_string appears {count} times in {path}; add surrounding lines to make it "
                              "unique, or set replace_all", failed=True)
        new = old.replace(old_string, new_string) if replace_all else old.replace(old_string, new_string, 1)
        atomic_write(path, new.encode("utf-8"))
        return ToolResult(f"edited {path}: {count if replace_all else 1} replacement(s)", diff=Diff(path, old, new))
