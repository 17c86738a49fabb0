"""read_file, write_file, edit_file. Regular files only; reads bounded in size and time; writes
atomic (temp file, fsync, rename) and committed only while the turn is not cancelled."""

from __future__ import annotations

import os
import threading
from typing import Any, BinaryIO

from bob_acp.cancel import Cancel
from bob_acp.exceptions import Cancelled, ClientError
from bob_acp.files.atomic import NotRegular, atomic_write, open_regular, read_up_to
from bob_acp.files.beneath import OutsideRoot, write_beneath
from bob_acp.files.workspace import PRIVATE_FOLDERS, PROTECTED_FILES, Workspace
from bob_acp.jsontext import clean
from bob_acp.tools.base import Diff, Location, Tool, ToolContext, ToolResult, run_in_worker

PATH_PARAMETER = {"type": "string", "description": "File path, relative to the working directory, absolute, or ~/…"}
READ_TIME_LIMIT = 30.0  # seconds a read may take (a dead network file system) before it is given up
WRITE_SETTLE = 10.0  # seconds a cancelled write may take to finish committing before the turn answers
SKIP_CHUNK = 64 * 1024
MAX_EDIT_BYTES = 64 * 1024 * 1024  # files edited in memory; past it the model is told to use bash
BINARY_SNIFF = 8192
PREVIEW_WAIT = 5.0  # seconds a proposed change waits for the editor's text before showing none




def _arg(args: dict[str, Any], name: str, kind: type, required: bool = True) -> Any:
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


def _read_whole(path: str, limit: int = MAX_EDIT_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (ValueError past it)."""
    with open_regular(path) as handle:
        data = read_up_to(handle, limit + 1)
    if len(data) > limit:
        raise ValueError(f"{clean(path)} is larger than {limit} bytes")
    return data


def _is_binary(data: bytes) -> bool:
    return b"\0" in data[:BINARY_SNIFF]


def _text(data: bytes) -> str:
    """Bytes as text that round-trips to the same bytes (invalid UTF-8 kept as surrogates)."""
    return data.decode("utf-8", "surrogateescape")


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _shown(text: str | None) -> str | None:
    """Text fit for a frame: undecodable bytes shown as U+FFFD."""
    return None if text is None else clean(text)


class _FileTool(Tool):
    one_file = True
    commits = False  # a tool that changes the file system waits for its commit on a cancel

    def title(self, args: dict[str, Any]) -> str:
        return f"{self.name}: {args.get('path', '')}"

    def title_in(self, args: dict[str, Any], ws: Workspace) -> str:
        """The title, and where the path leads when a link is on its way: a question about
        `notes.txt` must not hide that it writes `~/.bashrc`."""
        path = args.get("path")
        title = self.title(args)
        if not isinstance(path, str) or not path or "\0" in path:
            return title
        target = _link_target(ws.resolve(path), ws)
        return f"{title} (a link to {target})" if target else title

    def locations(self, args: dict[str, Any], ws: Workspace) -> list[Location]:
        path = args.get("path")
        if not isinstance(path, str) or not path or "\0" in path:
            return []
        return [Location(clean(ws.resolve(path)))]

    def in_project(self, args: dict[str, Any], ws: Workspace) -> bool:
        path = args.get("path")
        return isinstance(path, str) and bool(path) and "\0" not in path and ws.contains(path)

    def grant(self, args: dict[str, Any], ws: Workspace) -> str:
        path = args.get("path")
        if isinstance(path, str) and "\0" not in path:
            path = ws.resolve(path)
        return f"{self.name}: {path}"

    def run(self, args: dict[str, Any], ctx: ToolContext, cancel: Cancel) -> ToolResult:
        if self.commits:
            return run_in_worker(lambda c: self._guarded(args, ctx, c), cancel, settle_on_cancel=WRITE_SETTLE)
        return run_in_worker(lambda c: self._guarded(args, ctx, c), cancel, time_limit=READ_TIME_LIMIT,
                             what=f"{self.name} of {args.get('path')!r}")

    def _path(self, args: dict[str, Any], ctx: ToolContext) -> str | ToolResult:
        path = _arg(args, "path", str)
        if isinstance(path, ToolResult):
            return path
        if "\0" in path:
            return ToolResult("error: argument 'path' contains a NUL byte", failed=True)
        return ctx.workspace.resolve(path)

    def _guarded(self, args: dict[str, Any], ctx: ToolContext, cancel: Cancel) -> ToolResult:
        path = self._path(args, ctx)
        if isinstance(path, ToolResult):
            return path
        try:
            if self.commits and ctx.sandbox is not None:  # (what it creates is Bob's, not a job's)
                with ctx.sandbox.bobs_own_write():
                    return self._work(args, path, ctx, cancel)
            return self._work(args, path, ctx, cancel)
        except ClientError as exc:  # (the editor did not answer in time: said, nothing done instead)
            return ToolResult(f"error: {clean(str(exc))}", failed=True)
        except OutsideRoot as exc:
            return ToolResult(f"error: not written: {clean(str(exc))} (it was inside the project when it was "
                              "checked; a link changed since)", failed=True)
        except NotRegular as exc:
            return ToolResult(f"error: {clean(str(exc))}; {self.name} works on regular files only", failed=True)
        except InterruptedError:
            raise Cancelled() from None
        except ValueError as exc:
            return ToolResult(f"error: {clean(str(exc))}; use bash for such a file", failed=True)
        except OSError as exc:
            return ToolResult(f"error: {exc.strerror or exc}: {clean(path)}", failed=True)

    def _work(self, args: dict[str, Any], path: str, ctx: ToolContext, cancel: Cancel) -> ToolResult:
        raise NotImplementedError


class ReadFileTool(_FileTool):
    name = "read_file"
    kind = "read"
    changes_files = False
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

    def locations(self, args: dict[str, Any], ws: Workspace) -> list[Location]:
        found = super().locations(args, ws)
        offset = args.get("offset")
        if found and isinstance(offset, int) and not isinstance(offset, bool) and 1 < offset < 2 ** 32:
            found[0].line = offset
        return found

    def _work(self, args: dict[str, Any], path: str, ctx: ToolContext, cancel: Cancel) -> ToolResult:
        offset = _arg(args, "offset", int, required=False)
        limit = _arg(args, "limit", int, required=False)
        for bad in (offset, limit):
            if isinstance(bad, ToolResult):
                return bad
        if os.path.isdir(path):
            return ToolResult(f"error: {clean(path)} is a directory (list it with bash: ls)", failed=True)
        cap = ctx.config.tools.maxReadBytes
        first_line = max(offset or 1, 1)
        if ctx.client is not None and ctx.client.can_read:
            refused = _disk_refusal(path)  # Bob's own checks first: devices, FIFOs, binary files
            if refused is not None:
                return refused
            text = ctx.client.read(path, cancel, first_line if offset else None, limit)
            if text is not None:  # the editor's text: an unsaved buffer is what the model sees
                data = _bytes(text)
                return _page(path, data[:cap + 1], cap, first_line, limit, len(data))
        with open_regular(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            rest = _skip_lines(handle, first_line - 1, cancel, min(SKIP_CHUNK, cap + 1))
            if rest is None:
                return ToolResult(f"[{clean(path)} has fewer than {first_line} lines: nothing at offset {first_line}]")
            data = rest[:cap + 1] if len(rest) > cap else rest + handle.read(cap + 1 - len(rest))
        if _is_binary(data):
            return ToolResult(f"{clean(path)} is a binary file ({size} bytes); not shown", failed=True)
        return _page(path, data, cap, first_line, limit, size)


def _disk_refusal(path: str) -> ToolResult | None:
    """What the file tools refuse about the file on disk, whoever reads it (None: nothing)."""
    if not os.path.lexists(path) or not os.path.exists(os.path.realpath(path)):
        return None  # not on disk: the editor may have it (a new, unsaved buffer)
    with open_regular(path) as handle:
        head = handle.read(BINARY_SNIFF)
    if _is_binary(head):
        return ToolResult(f"{clean(path)} is a binary file; not shown", failed=True)
    return None


def _page(path: str, data: bytes, cap: int, first_line: int, limit: int | None, size: int) -> ToolResult:
    """Up to `cap` bytes of whole lines from `data` (the text from `first_line` on, at most
    cap + 1 bytes of it), with a note saying where to read on."""
    lines = _split_lines(data[:cap])
    if limit is not None and 0 <= limit < len(lines):
        shown = lines[:limit]
        note = f"\n[showing lines {first_line}–{first_line + limit - 1}; continue with offset {first_line + limit}]"
    elif len(data) > cap and len(lines) > 1 and not lines[-1].endswith(b"\n"):
        shown = lines[:-1]  # whole lines only, so the offset given continues exactly
        note = f"\n[cut at {cap} bytes of {size}; continue with offset {first_line + len(shown)}]"
    elif len(data) > cap and len(lines) > 1:
        shown = lines
        note = f"\n[cut at {cap} bytes of {size}; continue with offset {first_line + len(shown)}]"
    elif len(data) > cap:
        shown = lines
        note = (f"\n[line {first_line} alone is longer than the {cap}-byte cap; read the rest with bash "
                "(e.g. cut, head -c)]")
    else:
        shown, note = lines, ""
    return ToolResult(b"".join(shown).decode("utf-8", errors="replace") + note)


def _skip_lines(handle: BinaryIO, count: int, cancel: Cancel, chunk_size: int = SKIP_CHUNK) -> bytes | None:
    """Read past `count` lines in chunks of `chunk_size` bytes (never more is held); the bytes
    read beyond them, or None when the file has fewer lines. A cancel stops it between chunks."""
    if count <= 0:
        return b""
    while True:
        chunk = handle.read(chunk_size)
        if not chunk:
            return None
        if cancel.is_set():
            raise Cancelled()
        found = chunk.count(b"\n")
        if found < count:
            count -= found
            continue
        end = -1
        for _ in range(count):
            end = chunk.index(b"\n", end + 1)
        return chunk[end + 1:]


def _split_lines(data: bytes) -> list[bytes]:
    """Lines ended by \\n only (the same count the offset uses), ends kept."""
    parts = data.split(b"\n")
    lines = [part + b"\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


class WriteFileTool(_FileTool):
    name = "write_file"
    kind = "edit"
    commits = True
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

    def preview(self, args: dict[str, Any], ctx: ToolContext) -> Diff | None:
        path, content = self._path(args, ctx), args.get("content")
        if isinstance(path, ToolResult) or not isinstance(content, str):
            return None
        try:
            old = _old_text(path)
            editor = _editor_text(ctx, path, None)
        except (OSError, ValueError, Cancelled):
            return None
        return Diff(clean(path), _shown(editor if editor is not None else old), content)

    def _work(self, args: dict[str, Any], path: str, ctx: ToolContext, cancel: Cancel) -> ToolResult:
        content = _arg(args, "content", str)
        if isinstance(content, ToolResult):
            return content
        if os.path.isdir(path):
            return ToolResult(f"error: {clean(path)} is a directory", failed=True)
        old = _old_text(path)
        data = content.encode("utf-8")
        if ctx.confine:  # unasked because it stays in the project: it does, whatever links do meanwhile
            _write_confined(ctx, path, data, cancel)
            verb = "created" if old is None else "overwrote"
            return ToolResult(f"{verb} {clean(path)} ({len(data)} bytes)", diff=Diff(clean(path), _shown(old), content))
        through = _editor_write(ctx, path, content, cancel)
        if isinstance(through, ToolResult):
            return through
        if through is None:
            atomic_write(path, data, may_commit=lambda: not cancel.is_set())
        else:
            old = through if through != "" else old
        verb = "created" if old is None else "overwrote"
        where = " through the editor" if through is not None else ""
        return ToolResult(f"{verb} {clean(path)} ({len(data)} bytes){where}", diff=Diff(clean(path), _shown(old), content))


def _editor_text(ctx: ToolContext | None, path: str, cancel: Cancel | None) -> str | None:
    """The editor's text of `path` (tools.clientFs), None: the disk's. Asked once a call (what it
    gave is kept on the call's context), and never for a file the disk does not have (an editor
    answers that with an error)."""
    client = ctx.client if ctx is not None else None
    if ctx is None or client is None or not client.can_read or not os.path.lexists(path):
        return None
    if path in ctx.editor_texts:
        return ctx.editor_texts[path]
    if cancel is not None:
        text = client.read(path, cancel)
    else:
        bounded = Cancel()  # a preview, before any question: an editor that does not answer is not waited for
        timer = threading.Timer(PREVIEW_WAIT, bounded.set)
        timer.daemon = True
        timer.start()
        try:
            text = client.read(path, bounded)
        finally:
            timer.cancel()
    ctx.editor_texts[path] = text
    return text


def _editor_write(ctx: ToolContext, path: str, content: str, cancel: Cancel) -> str | ToolResult | None:
    """Write through the editor when it offers that: its previous text ("" when it did not say),
    a failed result when it refused, None when Bob writes the disk itself."""
    client = ctx.client
    if client is None or not client.can_write or _hard_linked(path):
        return None
    previous = _editor_text(ctx, path, cancel) or ""
    try:
        client.write(path, content, cancel)
    except ClientError as exc:
        return ToolResult(f"error: the editor could not write {clean(path)}: {exc}", failed=True)
    ctx.editor_written[path] = content  # (the buffer may hold it unsaved: the checkpoint records it so)
    return previous


def _write_confined(ctx: ToolContext, path: str, data: bytes, cancel: Cancel) -> None:
    """Write `path` inside the workspace root it lies in, never through a link out of it, never
    into a private folder (.git, .bob) or an AGENTS.md (bob_acp.files.beneath.write_beneath)."""
    root = ctx.workspace.root_of(path)
    if root is None:
        raise OutsideRoot(13, f"{path} is not inside the project")
    write_beneath(root, os.path.relpath(path, root), data, may_commit=lambda: not cancel.is_set(), refuse=protected)


def _hard_linked(path: str) -> bool:
    """Whether the file has other names (a package manager's store links its files into projects):
    an editor may write it in place, and change every copy; Bob's own write renames a new file
    over this name alone."""
    try:
        return os.stat(path).st_nlink > 1
    except OSError:
        return False


def protected(relative: str) -> bool:
    """Whether a path inside a project is one no unasked write may touch."""
    parts = relative.split(os.sep)
    return any(part in PRIVATE_FOLDERS for part in parts) or parts[-1] in PROTECTED_FILES


def _link_target(path: str, ws: Workspace) -> str | None:
    """Where `path` really is, when a link on its way makes that another place: a link below
    the session's root it lies in (the roots' own place as they are), or the file itself."""
    try:
        root = ws.root_of(path)
        if root is None:
            return os.path.realpath(path) if os.path.islink(path) else None
        walked = root
        for part in os.path.relpath(path, root).split(os.sep):
            walked = os.path.join(walked, part)
            if os.path.islink(walked):
                return os.path.realpath(path)
    except (OSError, ValueError):
        return None
    return None


def _old_text(path: str) -> str | None:
    """A file's current text, None when there is none; refuses what is not a regular file."""
    if not os.path.lexists(path):
        return None
    real = os.path.realpath(path)
    if not os.path.exists(real):
        return None  # a dangling symlink: the write creates its target
    try:
        data = _read_whole(real)
    except ValueError:
        return f"[previous content: more than {MAX_EDIT_BYTES} bytes, not shown]"
    return _text(data)


class EditFileTool(_FileTool):
    name = "edit_file"
    kind = "edit"
    commits = True
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

    def preview(self, args: dict[str, Any], ctx: ToolContext) -> Diff | None:
        path = self._path(args, ctx)
        if isinstance(path, ToolResult):
            return None
        try:
            planned = self._plan(args, path)
        except (OSError, ValueError, Cancelled):
            return None
        if isinstance(planned, ToolResult):
            return None
        old, new, _count = planned  # (the disk's text: the editor's is read once, when the edit is made)
        return Diff(clean(path), _shown(old), clean(new))

    def _plan(self, args: dict[str, Any], path: str, ctx: ToolContext | None = None,
              cancel: Cancel | None = None) -> ToolResult | tuple[str, str, int]:
        """(old text, new text, replacements) or the ToolResult saying why not. The current text
        is the editor's when it offers it (an unsaved buffer), after the disk's checks."""
        old_string = _arg(args, "old_string", str)
        new_string = _arg(args, "new_string", str)
        replace_all = _arg(args, "replace_all", bool, required=False) or False
        for value in (old_string, new_string, replace_all):
            if isinstance(value, ToolResult):
                return value
        if not old_string:
            return ToolResult("error: old_string is empty; use write_file to create or replace a whole file", failed=True)
        if not os.path.lexists(path):
            return ToolResult(f"error: no such file: {clean(path)} (use write_file to create it)", failed=True)
        data = _read_whole(path)
        if _is_binary(data):
            return ToolResult(f"error: {clean(path)} is a binary file; edit it with bash", failed=True)
        editor = _editor_text(ctx, path, cancel)
        old = editor if editor is not None else _text(data)
        count = old.count(old_string)
        if count == 0:
            return ToolResult(f"error: old_string not found in {clean(path)}; read the file and copy the text exactly",
                              failed=True)
        if count > 1 and not replace_all:
            return ToolResult(f"error: old_string appears {count} times in {clean(path)}; add surrounding lines to "
                              "make it unique, or set replace_all", failed=True)
        new = old.replace(old_string, new_string) if replace_all else old.replace(old_string, new_string, 1)
        return old, new, count if replace_all else 1

    def _work(self, args: dict[str, Any], path: str, ctx: ToolContext, cancel: Cancel) -> ToolResult:
        planned = self._plan(args, path, ctx, cancel)
        if isinstance(planned, ToolResult):
            return planned
        old, new, count = planned
        if ctx.confine:  # unasked because it stays in the project: it does, whatever links do meanwhile
            _write_confined(ctx, path, _bytes(new), cancel)
        elif ctx.client is not None and ctx.client.can_write and not _hard_linked(path):
            try:
                ctx.client.write(path, new, cancel)
            except ClientError as exc:
                return ToolResult(f"error: the editor could not write {clean(path)}: {exc}", failed=True)
            ctx.editor_written[path] = new
            return ToolResult(f"edited {clean(path)} through the editor: {count} replacement(s)",
                              diff=Diff(clean(path), _shown(old), clean(new)))
        else:
            atomic_write(path, _bytes(new), may_commit=lambda: not cancel.is_set())
        note = "" if old == clean(old) else " (the file is not valid UTF-8; its other bytes were kept as they were)"
        return ToolResult(f"edited {clean(path)}: {count} replacement(s){note}", diff=Diff(clean(path), _shown(old), clean(new)))
