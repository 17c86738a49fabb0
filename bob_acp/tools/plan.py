"""update_plan (with `tools.plan`): the model sets its whole plan; the editor shows it as a
checklist (an ACP `plan` update). Never asks permission: it touches nothing."""

from __future__ import annotations

from typing import Any

from bob_acp.cancel import Cancel
from bob_acp.jsontext import clean
from bob_acp.tools.base import Tool, ToolContext, ToolResult

NAME = "update_plan"
PRIORITIES = ("high", "medium", "low")
STATUSES = ("pending", "in_progress", "completed")
MAX_ENTRIES = 50
MAX_CONTENT = 500


class PlanTool(Tool):
    name = NAME
    changes_files = False
    kind = "think"
    needs_permission = False
    description = (
        "Set your plan for a task of several steps: the whole list each time (it replaces the previous one). "
        "The user sees it as a checklist. Keep it current: mark a step in_progress when you start it and "
        "completed when it is done."
    )
    parameters = {
        "type": "object",
        "properties": {
            "entries": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "content": {"type": "string", "description": "What the step does, in a short line."},
                        "priority": {"type": "string", "enum": list(PRIORITIES)},
                        "status": {"type": "string", "enum": list(STATUSES)},
                    },
                    "required": ["content", "priority", "status"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["entries"],
        "additionalProperties": False,
    }

    def title(self, args: dict[str, Any]) -> str:
        entries = args.get("entries")
        return f"{NAME}: {len(entries)} step(s)" if isinstance(entries, list) else NAME

    def run(self, args: dict[str, Any], ctx: ToolContext, cancel: Cancel) -> ToolResult:
        entries = plan_entries(args)
        if isinstance(entries, str):
            return ToolResult(f"error: {entries}", failed=True)
        done = sum(1 for e in entries if e["status"] == "completed")
        return ToolResult(f"plan updated: {len(entries)} step(s), {done} completed", plan=entries)


def plan_entries(args: dict[str, Any]) -> list[dict[str, Any]] | str:
    """The plan's entries as ACP PlanEntry objects, or what is wrong with them."""
    entries = args.get("entries")
    if not isinstance(entries, list):
        return "argument 'entries' must be a list of {content, priority, status}"
    if len(entries) > MAX_ENTRIES:
        return f"a plan has at most {MAX_ENTRIES} entries"
    out = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("content"), str) or not entry["content"].strip():
            return f"entry {index}: 'content' must be a non-empty string"
        if entry.get("priority") not in PRIORITIES:
            return f"entry {index}: 'priority' must be one of {', '.join(PRIORITIES)}"
        if entry.get("status") not in STATUSES:
            return f"entry {index}: 'status' must be one of {', '.join(STATUSES)}"
        out.append({"content": clean(entry["content"].strip())[:MAX_CONTENT], "priority": entry["priority"],
                    "status": entry["status"]})
    return out
