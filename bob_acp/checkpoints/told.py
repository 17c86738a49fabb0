"""What /undo tells the conversation: a turn's title in its words, and the compression summary
that holds an undone turn told so (the model would go on from a change that is no more)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bob_acp.checkpoints.records import Record


def tell_summary(messages: list[dict[str, Any]], record: Record, what: str) -> None:
    """The compression summary that holds an undone turn told so (the model would go on from a
    change that is no more)."""
    from bob_acp.context import history

    summary = next((m for m in reversed(messages) if m.get("summary")), None)
    if summary is None:
        return
    text = history.text_of(summary) + f"\n\n[Since this summary, /undo took back a turn of it: {what}]"
    summary["content"] = [history.text_part(text)]


def title_of(messages: list[dict[str, Any]]) -> str:
    from bob_acp import sessions

    return sessions.title_of(messages) or ""
