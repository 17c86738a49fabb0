"""One session's checkpoints (tools.checkpoints): what Bob's own tool calls changed, so that /undo
takes a turn back and /redo puts it again, and nothing anyone else changed is ever touched.

Changes are attributed to the calls that made them. write_file and edit_file: the file's exact
bytes and mode before and after the call (ignored files included). bash: each root as it was
right before the command and right after it (bob_acp.checkpoints.store); what changed in
between is the command's. So a window is a call, not a turn: what the user, an editor's
autosave, a formatter or a background job changes while the model thinks, while the user is
asked, or after a command ended, is never the turn's. Within a command's run Bob cannot tell
who wrote a file: /undo says which restored files changed while a command ran.

A turn's record holds, for each path, its state before Bob's first call that touched it and
after the last; when someone else changed it between two of Bob's calls, only Bob's part after
that is taken back. /undo and /redo are journaled: the record says a restore is under way (in
the session's file) before a file is touched, and the restore is idempotent, so a failure or a
kill leaves it to be finished by the next /undo, the conversation untrimmed.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any, Callable

from bob_acp import threads
from bob_acp.cancel import Cancel
from bob_acp.checkpoints import changes as delta
from bob_acp.checkpoints import journal, restore
from bob_acp.checkpoints.head import git_head
from bob_acp.checkpoints.look import blob_id
from bob_acp.checkpoints.records import Change, Record, parse, sign, signed, user_key
from bob_acp.checkpoints.store import CheckpointError, Shadow, Snapshot, store_of
from bob_acp.checkpoints.told import tell_summary, title_of
from bob_acp.exceptions import Cancelled
from bob_acp.files.beneath import OutsideRoot

if TYPE_CHECKING:
    from bob_acp.files.workspace import Workspace
    from bob_acp.log import Logger

TAG = "checkpoint"  # the key on a turn's user message naming its record
UNRECORDED = "unrecorded"  # the key on a turn's user message when it may have changed files no record holds
CUT_WAIT = 2.0  # seconds a session's end gives a first look it stops to keep what it read
# Seconds a call waits for the project's first look before running unrecorded: a command typed as
# the session opens is recorded in a small project (whose look takes well under a second), while
# a huge one's first command is never held long.
FIRST_LOOK_WAIT = 3.0
PACK_AT = 1024  # loose objects in a store before they are packed
TIDY_EVERY = 8  # recorded turns between looks at the store's size (sooner after a turn that wrote much)
STORE_LIMIT = 1024 * 1024 * 1024  # bytes a project's store may take before the oldest records go


class Checkpoints:
    """One session's checkpoints: windows taken around its calls (by the engine), a record per
    turn, walked back and forth by /undo and /redo (under the turn lock: never two at once)."""

    def __init__(self, ws: Workspace, session_id: str, keep: int, max_bytes: int, log: Logger | None = None,
                 key: bytes | None = None, store_limit: int = STORE_LIMIT, own: tuple[str, ...] = ()):
        self.workspace = ws
        self.session_id = session_id
        self.keep = keep
        self.max_bytes = max_bytes
        self.store_limit = store_limit
        self.log = log
        store = store_of(ws.cwd)
        self.shadows = {root: Shadow(root, store, max_bytes, look_ref=f"refs/look/{session_id}/{index}")
                        for index, root in enumerate(ws.roots)}
        self.records: list[Record] = []
        self.own = {os.path.realpath(p) for p in (*own, "/proc/self/fd/2")}  # files Bob itself writes (its logs)
        self._key = key if key is not None else user_key()
        self._warm = threading.Event()  # the first snapshot of every root was made (or could not be)
        self._ahead = Cancel()  # the first snapshot made ahead, stopped when the session ends
        self._turn = ""
        self._chains: dict[tuple[str, str], list[Change]] = {}
        self._notes: list[str] = []
        self._said: set[str] = set()  # (what this turn said once already)
        self._touched = False  # a call of this turn opened a window
        self._missed = False  # a call of this turn ran with no window (a first look not made, a failure)
        self._jobs = False  # a command of this turn left a job running
        self._job_look: tuple[str, dict[str, Snapshot]] | None = None  # the last such turn's record, its end
        self._tidy_turns = 0  # recorded turns since the store's size was looked at
        self._grown = 0  # bytes of the files those turns changed (what the store may have grown by)
        self.unrecorded_turns = 0  # turns that changed files but could not be recorded

    # ---- the first snapshot, ahead ----------------------------------------------------------------

    def prewarm(self) -> None:
        """A project's first snapshot reads every file (about a second for 10,000): made now, in
        the background, with the mode of every file, so that a turn pays only for what changed."""
        try:
            threads.start(self._warm_up, "bob-checkpoint-ahead")
        except threads.ThreadLimit:
            self._warm_up()  # (no thread to be had: made now, as a turn would)

    def _warm_up(self) -> None:
        import time

        try:
            for root, shadow in self.shadows.items():
                started = time.monotonic()
                found = shadow.snapshot(self._ahead)
                if self.log is not None:
                    self.log.info(f"[acp] session {self.session_id}: checkpoints: first look at {root} made "
                                  f"({len(found.files)} files, {(time.monotonic() - started) * 1000:.0f} ms)")
        except Cancelled:
            return
        except (OSError, CheckpointError) as exc:
            if self.log is not None:
                self.log.info(f"[acp] checkpoints: first snapshot not made ahead: {exc}")
        finally:
            self._warm.set()
        for shadow in self.shadows.values():  # (the first snapshot's objects, one a file: packed)
            if self._ahead.is_set():
                return
            self._pack(shadow)

    def close(self) -> None:
        """The session ends: a look still being made ahead stops, and its last look no longer holds
        anything in the store."""
        self._ahead.set()
        self._warm.wait(CUT_WAIT)  # (a first look cut short is kept as far as it went: the next continues it)
        for shadow in self.shadows.values():
            self._upkeep(shadow.forget_look, shadow, "left")

    # ---- during a turn -------------------------------------------------------------------------

    def begin_turn(self) -> None:
        """A new turn. What /undo took back stays redo-able, so that no byte /undo replaced is
        lost (for every path not changed again since); its messages stay out of the conversation,
        which has gone on without them."""
        self._turn = uuid.uuid4().hex
        self._chains = {}
        self._notes = []
        self._said = set()
        self._touched = False
        for record in self.records:
            if record.undone:
                record.later = True

    def open_window(self, name: str, path: str | None, cancel: Cancel, command: str = "",
                    one_file: bool = False) -> tuple[delta.Window | None, str]:
        """Before a call that may change files (`one_file`: the file at `path` alone, as the write
        tools do): (its window, or None when it cannot be recorded; what to tell the user about
        that, once a turn, or "")."""
        if not self._first_look(cancel):  # (not done in time: the call goes unrecorded, and says so)
            self._missed = True
            return None, self._once("warming", "This call's changes are not recorded (/undo cannot take them back): "
                                    "the project's first checkpoint is still being made.")
        self._touched = True
        if one_file:
            return self._open_file(name, path)
        window = delta.Window(name, command=command)
        for root, shadow in self.shadows.items():
            window.snapshots[root] = shadow.snapshot(cancel)
            window.heads[root] = git_head(root)
        return window, ""

    def _first_look(self, cancel: Cancel) -> bool:
        """Whether the project's first look is done, waited for up to FIRST_LOOK_WAIT (a cancel of
        the turn stops the wait within a tick)."""
        deadline = time.monotonic() + FIRST_LOOK_WAIT
        while not self._warm.wait(0.05):
            if cancel.is_set() or time.monotonic() >= deadline:
                return False
        return True

    def close_window(self, window: delta.Window, jobs: bool = False) -> str:
        """After the call (`jobs`: a command that left a job running): what it changed joins the
        turn; what the user must know now, or ""."""
        self._jobs = self._jobs or jobs
        if window.file is not None:
            return self._close_file(window)
        said = []
        for root, shadow in self.shadows.items():
            before = window.snapshots[root]
            after = shadow.snapshot(None)
            found: dict[str, Change] = {}
            for path, old, new in delta.changes(before, after):
                found[path] = Change(root, path, delta.state_of(old), delta.state_of(new), window.name,
                                     during=not delta.named(path, window.command))
            for change in delta.folders_changed(root, before, after, window.command):
                both = found.get(change.path)  # (a file that became a folder, or the other way: one change)
                found[change.path] = change if both is None else Change(
                    root, change.path, both.before or change.before, both.after or change.after, window.name,
                    during=not delta.named(change.path, window.command))
            for change in found.values():
                self._join(change)
            said += self._unrecordable(root, before, after, window.heads[root])
        self._keep_window()
        said = [line for line in said if line]
        return ("Not recorded, so /undo will not take it back: " + "; ".join(said) + ".") if said else ""

    def _unrecordable(self, root: str, before: Snapshot, after: Snapshot, head: bytes) -> list[str]:
        """What a command changed that no record holds, one line each (said in the turn)."""
        said = []
        for path in sorted(path for path in before.nested.keys() | after.nested.keys()
                           if before.nested.get(path) != after.nested.get(path)):
            said.append(self._note(f"{self._shown(root, path)} (a git repository inside: Bob never reads one, so "
                                   "/undo does not take back what changed in it)"))
        for path in sorted(set(after.big) | set(before.big)):
            if after.big.get(path) != before.big.get(path):
                said.append(self._note(f"{self._shown(root, path)} (larger than tools.checkpointMaxBytes)"))
        touched = [path for path in sorted(before.ignored.keys() | after.ignored.keys())
                   if before.ignored.get(path) != after.ignored.get(path)
                   and os.path.realpath(os.path.join(root, path)) not in self.own]
        if touched:
            shown = ", ".join(self._shown(root, p) for p in touched[:5]) + (
                f" and {len(touched) - 5} more" if len(touched) > 5 else "")
            said.append(self._note(f"{shown} (left out by .gitignore: a command's changes there are not recorded)"))
        for path in sorted(before.unrecorded.keys() | after.unrecorded.keys()):
            if before.unrecorded.get(path) != after.unrecorded.get(path):
                said.append(self._note(f"{self._shown(root, path)} (/undo never writes an AGENTS.md: what the command "
                                       "did to it stays)"))
        for line in sorted(set(after.unread) - set(before.unread)):
            said.append(self._note(f"{self._shown(root, line)} (could not be read)"))
        if git_head(root) != head:
            said.append(self._note(f"git's HEAD or branch in {root} (commits, checkouts and branch changes are "
                                   "git's to undo)"))
        return said

    def end_turn(self, question: dict[str, Any]) -> Record | None:
        """After the turn (`question`: the message it began with, a steer's joining it later
        included in the turn): its record, when Bob's calls changed anything. A turn that may have
        changed files no record holds is marked so on its question, for /undo to say."""
        changes = [c for c in (delta.collapse(chain) for chain in self._chains.values()) if c is not None]
        notes, self._notes, self._chains = self._notes, [], {}
        missed, self._missed = self._missed, False
        jobs, self._jobs = self._jobs, False
        if notes or missed:
            question[UNRECORDED] = True
        if not changes:
            if notes or missed:
                self.unrecorded_turns += 1
            if self._touched:  # (what its calls kept for a change that came to nothing)
                self._drop_refs(self._turn, set(self.shadows))
            return None
        record = Record(self._turn, changes, notes, jobs=jobs)
        if jobs:  # (what its jobs change after it is told at /undo: its end, as the last look saw it)
            self._job_look = (record.id, {root: shadow.last for root, shadow in self.shadows.items()})
        for change in changes:
            if change.after is not None and change.after["type"] == "file":
                try:
                    self._grown += os.lstat(os.path.join(change.root, change.path)).st_size
                except OSError:
                    pass
        question[TAG] = record.id
        self.records.append(record)
        if len(self.records) > self.keep:
            old, self.records = self.records[:-self.keep], self.records[-self.keep:]
            self._drop(old)
        return record

    def tidy(self) -> str:
        """After a recorded turn: the store packed when loose objects piled up, and bounded (the
        oldest records dropped past tools.checkpointStoreLimit); what the user must know, or ""."""
        self._tidy_turns += 1
        if self._tidy_turns < TIDY_EVERY and self._grown < self.store_limit // 64:
            return ""  # (a look at the store's size costs a git run: every few turns, or after a large one)
        self._tidy_turns, self._grown = 0, 0
        dropped = 0
        for shadow in self.shadows.values():
            size, loose = shadow.size()
            while size > self.store_limit and len(self.records) > 1:
                self._drop([self.records.pop(0)])
                dropped += 1
                self._pack(shadow)
                self._drop_loose(shadow)
                size, loose = shadow.size()
            if loose >= PACK_AT:
                try:
                    threads.start(lambda shadow=shadow: self._pack(shadow), "bob-checkpoint-pack")
                except threads.ThreadLimit:
                    pass  # (packed after a later turn)
        if not dropped:
            return ""
        return (f"The checkpoint store of this project passed tools.checkpointStoreLimit "
                f"({self.store_limit // (1024 * 1024)} MiB): the {dropped} oldest undo point(s) of this session were "
                "dropped.")

    # ---- /undo and /redo -----------------------------------------------------------------------

    def undo(self, messages: list[dict[str, Any]], editor: restore.Editor | None, save: Callable[[], None]) -> str:
        record = next((r for r in reversed(self.records) if not r.undone), None)
        if record is None:
            return "↩️ Nothing to undo: " + self._why_nothing()
        index = next((i for i, m in enumerate(messages) if m.get(TAG) == record.id), None)
        lost = self._lost(record, messages[index:] if index is not None else [], save)
        if lost:
            return "↩️ " + lost
        after = [m for m in messages[index + 1:] if m["role"] == "user" and not m.get("summary")] \
            if index is not None else []
        later = [title_of([m]) for m in after if not m.get(UNRECORDED)]
        unrecorded = [title_of([m]) for m in after if m.get(UNRECORDED)]
        outcome = self._apply(record, 0, editor, save)
        if not outcome.complete:
            return ("↩️ /undo did not finish: " + restore.words(outcome) + " Nothing of the conversation was taken "
                    "out; /undo again tries the rest.")
        if outcome.open_in_editor:  # (the turn stays: taken out now, "try again" would find nothing)
            return ("↩️ /undo did not finish: " + restore.words(outcome) + " The turn stays, and nothing of the "
                    "conversation was taken out: save or close those files in the editor, then /undo again.")
        if index is not None:
            record.messages = messages[index:]
            del messages[index:]
        else:  # (compacted: the summary still tells of the change; it is told it was undone)
            tell_summary(messages, record, restore.words(outcome))
        record.undone = True
        title = title_of(record.messages)
        said = [f"↩️ Undid the turn “{title}”" if title else "↩️ Undid the last recorded turn (the conversation no "
                "longer held it)"]
        if record.jobs:
            said.append(self._since_jobs(record))
        if unrecorded:
            said.insert(0, "⚠️ The latest turn(s) " + ", ".join(f"“{t}”" for t in unrecorded) + " changed files that "
                        "could not be recorded (said then): those changes are left as they are, and /undo takes back "
                        "the last recorded turn before them.")
        if later:
            said.append("Taken out of the conversation with it, the later turn(s) that changed no files: "
                        + ", ".join(f"“{t}”" for t in later) + ".")
        said.append(restore.words(outcome))
        if record.notes:
            said.append("Not recorded, so not taken back: " + "; ".join(record.notes) + ".")
        return "\n".join(line for line in said if line)

    def redo(self, messages: list[dict[str, Any]], editor: restore.Editor | None, save: Callable[[], None]) -> str:
        # (the last /undo's chain first; then what was undone before the turns since)
        undone = [r for r in self.records if r.undone and not r.later] or [r for r in self.records if r.undone]
        if not undone:
            return "↪️ Nothing to redo: /redo puts back what an /undo took."
        record = undone[0]
        lost = self._lost(record, record.messages, save)
        if lost:
            return "↪️ " + lost
        outcome = self._apply(record, 1, editor, save)
        if not outcome.complete:
            return "↪️ /redo did not finish: " + restore.words(outcome) + " /redo again tries the rest."
        title = title_of(record.messages)
        if record.later:  # (the conversation went on without that turn: its files alone come back)
            head = (f"↪️ Put back the files of the turn “{title}”" if title else "↪️ Put back the files of that turn")
            head += (" (the conversation went on since, without it: its messages are not put back; the files "
                     "changed again since are left as they are)")
        else:
            messages.extend(record.messages)
            head = f"↪️ Redid the turn “{title}”" if title else "↪️ Redid the turn"
        record.messages = []
        record.undone = record.later = False
        return "\n".join(line for line in (head, restore.words(outcome)) if line)

    def _since_jobs(self, record: Record) -> str:
        """A turn whose command left a job running: what changed since the turn ended (the job's
        doing, or anyone's), left as it is and named; never taken back silently."""
        if self._job_look is None or self._job_look[0] != record.id:
            return ("A command of that turn left a job running: what it changed after the turn is not known to Bob "
                    "(it is left as it is): check the files it works on.")
        changed: list[str] = []
        for root, then in self._job_look[1].items():
            now = self.shadows[root].snapshot(None)
            paths = {path for path, _old, _new in delta.changes(then, now)} | (then.folders.keys() ^ now.folders.keys())
            changed += [self._shown(root, p) for p in sorted(paths)]
        if not changed:
            return "A command of that turn left a job running; nothing has changed since the turn."
        shown = ", ".join(changed[:10]) + (f" and {len(changed) - 10} more" if len(changed) > 10 else "")
        return (f"A command of that turn left a job running, and since the turn these changed: {shown}. They are "
                "left as they are: /undo takes back the turn, not what a job did after it.")

    def _lost(self, record: Record, messages: list[dict[str, Any]], save: Callable[[], None]) -> str:
        """When the store no longer holds a copy a record needs (its folder was cleaned by hand):
        the record dropped, said once ("" while it is whole). It could never be restored, so
        "try again" would be a dead end; nothing is touched."""
        needed: dict[str, set[str]] = {}
        for change in record.changes:
            needed.setdefault(change.root, set()).update(change.blobs())
        try:
            missing = [b for root, blobs in needed.items() if root in self.shadows
                       for b in self.shadows[root].missing(sorted(blobs))]
        except (OSError, CheckpointError):
            return ""  # (the store cannot be asked now: the restore says what fails)
        if not missing:
            return ""
        self.records.remove(record)
        self._drop([record])
        save()
        title = title_of(messages)
        return (f"The undo point of the turn “{title or 'before'}” cannot be used: the checkpoint store no longer "
                f"holds {len(missing)} of the copies it needs (was .bob/checkpoints removed or changed by hand?). "
                "It is dropped; no file was touched, and the conversation is as it was.")

    def interrupted(self) -> str:
        """What to tell at load about a restore a stopped Bob left unfinished, or ""."""
        pending = [r for r in self.records if r.pending is not None]
        if not pending:
            return ""
        command = "/undo" if pending[0].pending == 0 else "/redo"
        return (f"An {command} of this session did not finish (Bob was stopped during it): some files may be put back "
                f"and others not. Run {command} again to finish it; nothing else is touched.")

    def _apply(self, record: Record, to: int, editor: restore.Editor | None, save: Callable[[], None]) -> restore.Outcome:
        record.pending = to
        save()  # (the journal: said before a file is touched)
        journal.mark(store_of(self.workspace.cwd), self.session_id, to)  # (and to every other session here)
        shadows = self.shadows
        read: dict[str, bytes] = {}  # (the record's blobs, read at once: one git run a store, not one a file)
        for root, shadow in shadows.items():
            wanted = sorted({b for c in record.changes if c.root == root for b in c.blobs()} - read.keys())
            with contextlib.suppress(CheckpointError, OSError, ValueError):
                read.update(shadow.blobs(wanted))

        def blob(blob_id: str) -> bytes:
            if blob_id in read:
                return read[blob_id]
            for shadow in shadows.values():
                try:
                    read[blob_id] = shadow.blob(blob_id)
                    return read[blob_id]
                except CheckpointError:
                    continue
            raise CheckpointError(f"the store has lost {blob_id[:12]} (its folder was changed by hand?)")

        changes = [c for c in record.changes if c.root in shadows]
        outcome = restore.apply(changes, to, blob, lambda c: self._shown(c.root, c.path), self.max_bytes, editor)
        outcome.kept += [f"{self._shown(c.root, c.path)} (not in a folder of this session any more)"
                         for c in record.changes if c.root not in shadows]
        if outcome.complete:
            record.pending = None
            journal.unmark(store_of(self.workspace.cwd), self.session_id)
        return outcome

    def others_unfinished(self) -> list[str]:
        """What a new session in this folder must hear: each /undo or /redo another session began
        here and did not finish (Bob was stopped during it), until it is finished."""
        return journal.unfinished(store_of(self.workspace.cwd), self.session_id)

    def _why_nothing(self) -> str:
        reasons = ["no change Bob made in this session's turns is recorded"]
        if self.unrecorded_turns:
            reasons.append(f"{self.unrecorded_turns} turn(s) changed only what cannot be recorded (said at the time)")
        if self.keep:
            reasons.append(f"only the last {self.keep} recorded turns are kept")
        return "; ".join(reasons) + ". Changes commands make to files the project ignores (.gitignore) are never recorded."

    # ---- kept with the session -----------------------------------------------------------------

    def data(self, redact: Callable[[object], object] | None = None) -> list[dict[str, Any]]:
        """The records, signed, for the session's file; `redact`: what they go through first (the
        configuration's secrets out of the messages an /undo took), so that the signature holds
        for what is written."""
        signed_items = []
        for record in self.records:
            item = record.data()
            if redact is not None:
                item = redact(item)  # type: ignore[assignment]
            item["mac"] = sign(self._key, self.session_id, item)
            signed_items.append(item)
        return signed_items

    def load(self, items: object) -> int:
        """The records of a session's file, those signed with this user's key for this session;
        how many were left out."""
        left_out = 0
        for item in items if isinstance(items, list) else []:
            record = parse(item)
            if record is None or not signed(self._key, self.session_id, item):
                left_out += 1
                continue
            if all(c.root in self.shadows for c in record.changes):
                self.records.append(record)
        if left_out and self.log is not None:
            self.log.warning(f"[acp] session {self.session_id}: {left_out} checkpoint record(s) of its file left out "
                             "(not signed by this user's key, edited, or made by an older Bob)")
        self.records = self.records[-self.keep:]
        return left_out

    def forget(self) -> None:
        """The session is deleted: its records go too."""
        self._drop(self.records)
        self.records = []

    # ---- inside ----------------------------------------------------------------------------------

    def _open_file(self, name: str, path: str | None) -> tuple[delta.Window | None, str]:
        """A file tool's window: the file's state and bytes before it writes."""
        if path is None:
            return None, ""
        real = os.path.realpath(path)
        root = self.workspace.root_of(real)
        if root is None:
            return None, ""  # (outside the project: the question asked named it; nothing to record)
        relative = os.path.relpath(real, root).replace(os.sep, "/")
        if restore.never_written(relative):
            return None, self._once(relative, f"Not recorded, so /undo will not take it back: {relative} (/undo never "
                                    "writes .git, .bob or AGENTS.md).")
        window = delta.Window(name, file=(root, relative))
        try:
            window.old = delta.file_state(root, relative, self.max_bytes)
        except ValueError:
            return None, self._once(relative, f"Not recorded, so /undo will not take it back: {relative} (larger "
                                    "than tools.checkpointMaxBytes).")
        except (OSError, OutsideRoot):
            return None, ""
        return window, ""

    def _close_file(self, window: delta.Window) -> str:
        assert window.file is not None and window.old is not None
        root, relative = window.file
        try:
            new = delta.file_state(root, relative, self.max_bytes)
        except (OSError, ValueError, OutsideRoot):
            return ""
        (before, old_bytes), (after, new_bytes) = window.old, new
        # Through the editor, the file is its buffer: the text it had before (unsaved lines the
        # edit kept included) and the text it was given (held unsaved, maybe: the disk has not it).
        mode = next((s["mode"] for s in (after, before) if s is not None and s.get("type") == "file"), 0o644)
        # (Where the disk says the same, line ends aside, its exact bytes are what is kept.)
        had = delta.in_editor(window.editor_texts, root, relative)
        given = delta.in_editor(window.editor_written, root, relative)
        if (had is not None and before is not None and before.get("type") == "file"
                and not delta.same_text(had, old_bytes)):
            before, old_bytes = {"type": "file", "mode": before["mode"], "blob": blob_id(had)}, had
        if given is not None and not (after is not None and after.get("type") == "file"
                                      and delta.same_text(given, new_bytes)):
            after, new_bytes = {"type": "file", "mode": mode, "blob": blob_id(given)}, given
        if restore.same(before, after):
            return ""
        shadow = self.shadows[root]
        blobs = [data for state, data in ((before, old_bytes), (after, new_bytes))
                 if state is not None and "blob" in state]
        shadow.put_kept(self._ref(self._turn, f"f{len(self._chains)}-{uuid.uuid4().hex[:8]}"), blobs)
        self._join(Change(root, relative, before, after, window.name))
        return ""

    def _join(self, change: Change) -> None:
        self._chains.setdefault((change.root, change.path), []).append(change)

    def _keep_window(self) -> None:
        """The blobs of the turn's changes so far held by refs (a prune by another session
        meanwhile would take the old ones: the index no longer holds them)."""
        for index, (root, shadow) in enumerate(self.shadows.items()):
            blobs = [b for chain in self._chains.values() for c in chain if c.root == root for b in c.blobs()]
            if blobs:
                shadow.keep(self._ref(self._turn, f"root{index}"), blobs)

    def first_failure(self) -> bool:
        """Whether a failure to record is this turn's first (said once a turn)."""
        self._missed = True
        return bool(self._once("failure", "failed"))

    def _note(self, line: str) -> str:
        if line in self._notes:
            return ""
        self._notes.append(line)
        return line

    def _once(self, key: str, line: str) -> str:
        if key in self._said:
            return ""
        self._said.add(key)
        return line

    def _drop_loose(self, shadow: Shadow) -> None:
        """What a pack left loose because nothing holds it, gone now (the store's bound)."""
        self._upkeep(shadow.drop_loose, shadow, "pruned")

    def _pack(self, shadow: Shadow) -> None:
        self._upkeep(shadow.pack, shadow, "packed")

    def _upkeep(self, step: Callable[[], None], shadow: Shadow, done: str) -> None:
        """A step of the store's upkeep: one that fails is logged, and tried again later."""
        try:
            step()
        except (OSError, CheckpointError) as exc:
            if self.log is not None:
                self.log.info(f"[acp] checkpoints: the store of {shadow.root} not {done}: {exc}")

    def _drop(self, records: list[Record]) -> None:
        for record in records:
            self._drop_refs(record.id, {c.root for c in record.changes})

    def _drop_refs(self, record_id: str, roots: set[str]) -> None:
        for root in roots:
            shadow = self.shadows.get(root)
            if shadow is not None:
                try:
                    shadow.drop(f"refs/bob/{self.session_id}/{record_id}/")
                except (OSError, CheckpointError) as exc:
                    if self.log is not None:
                        self.log.info(f"[acp] checkpoints: refs of {record_id} not dropped: {exc}")

    def _ref(self, record_id: str, name: str) -> str:
        return f"refs/bob/{self.session_id}/{record_id}/{name}"

    def _shown(self, root: str, path: str) -> str:
        return path if root == self.workspace.cwd else os.path.join(root, path)
