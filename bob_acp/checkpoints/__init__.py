"""Checkpoints (tools.checkpoints): /undo takes back what Bob's own tool calls changed, /redo puts
it again. Three rooms: the git store of each root (store), the signed records kept in the
session's file (records), the link-safe restore (restore), and the session's side of it, which
opens a window around each call and keeps a record a turn (session)."""

from bob_acp.checkpoints.session import TAG, Checkpoints
from bob_acp.checkpoints.store import CheckpointError, forget, git_missing

__all__ = ["TAG", "CheckpointError", "Checkpoints", "forget", "git_missing"]
