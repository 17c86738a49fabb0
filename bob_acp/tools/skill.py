"""read_skill: a skill's instructions and the absolute paths of its files. Never asks permission."""

from __future__ import annotations

from typing import Any

from bob_acp.cancel import Cancel
from bob_acp.jsontext import clean
from bob_acp.tools.base import Tool, ToolContext, ToolResult


class ReadSkillTool(Tool):
    name = "read_skill"
    changes_files = False
    kind = "read"
    needs_permission = False
    description = (
        "Read a skill's instructions before using it (the system prompt lists the skills). Returns the "
        "instructions and the absolute paths of the skill's own files (scripts you can run with bash)."
    )
    parameters = {
        "type": "object",
        "properties": {"name": {"type": "string", "description": "The skill's name."}},
        "required": ["name"],
        "additionalProperties": False,
    }

    def title(self, args: dict[str, Any]) -> str:
        return f"read_skill: {args.get('name', '')}"

    def run(self, args: dict[str, Any], ctx: ToolContext, cancel: Cancel) -> ToolResult:
        name = args.get("name")
        if not isinstance(name, str) or not name:
            return ToolResult("error: argument 'name' must be a skill name", failed=True)
        skill = ctx.skills.get(name)
        if skill is None:
            known = ", ".join(sorted(ctx.skills)) or "none"
            return ToolResult(f"error: no skill named '{name}'; the skills are: {known}", failed=True)
        parts = [f"# Skill: {skill.name}", f"Folder: {clean(skill.folder)}", "", skill.instructions.strip()]
        files = skill.files
        if files:
            parts += ["", "Files of this skill (absolute paths):"] + [f"- {clean(path)}" for path in files]
        if skill.more:
            parts.append(f"- … and {skill.more} more file(s) (list them with bash: find {clean(skill.folder)})")
        return ToolResult("\n".join(parts) + "\n")
