"""What runs where, and what is asked, as far as the sandbox decides it: whether a call runs
confined, what its sandbox lacks here, whether `sandboxed` mode runs it unasked, and the modes a
session cannot have. The engine asks; the answers are the sandbox's."""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from bob_acp.sandbox.box import Sandbox


def confined(sandbox: Sandbox | None, tool: str, arguments: dict[str, Any]) -> bool:
    """Whether this call is a bash command that will run in the session's sandbox (confined by
    something: a best-effort sandbox with nothing to confine runs it as it is)."""
    return tool == "bash" and sandbox is not None and arguments.get("unconfined") is not True and sandbox.confines


def lacking(sandbox: Sandbox | None) -> str | None:
    """What the sandbox a confined call runs in lacks on this machine (said with the call)."""
    if sandbox is None or sandbox.complete:
        return None
    return sandbox.partial()


def runs_unasked(sandbox: Sandbox | None, mode: str, sandboxed: bool) -> bool:
    """Whether `sandboxed` mode runs this command without a question: it runs confined, in a
    sandbox that holds all it promises here (or best-effort, as the user chose)."""
    return mode == "sandboxed" and sandboxed and sandbox is not None and sandbox.unasked()


def unoffered_modes(sandbox: Sandbox | None, broad: str | None) -> dict[str, str]:
    """The approval modes a session cannot have, each with why: `sandboxed` without a sandbox
    that holds all it promises here (unless best-effort), and neither it nor `allow-edits` when a
    folder of the session is the whole disk, the home folder or above it."""
    found: dict[str, str] = {}
    if broad is not None:
        what = "the whole disk" if broad == os.sep else "your home folder (or a folder above it)"
        why = (f"this session's folder {broad} is {what}: \"this project's files\" would be all of yours, so no "
               "approval mode runs anything unasked in it and its commands run without a sandbox")
        found["allow-edits"] = found["sandboxed"] = why
    elif sandbox is None:
        found["sandboxed"] = "no sandbox is configured (tools.sandbox)"
    elif not sandbox.unasked():
        found["sandboxed"] = (f"the sandbox is incomplete on this machine ({sandbox.partial()}), so its "
                              "commands are asked (tools.sandbox: best-effort runs them unasked all the same)")
    return found
