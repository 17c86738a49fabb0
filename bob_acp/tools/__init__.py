"""The tool registry: what the model may call, in the order it is offered."""

from __future__ import annotations

from bob_acp.tools.base import Tool
from bob_acp.tools.bash import BashTool, kill_all  # noqa: F401
from bob_acp.tools.files import EditFileTool, ReadFileTool, WriteFileTool
from bob_acp.tools.skill import ReadSkillTool

TOOLS: tuple[Tool, ...] = (BashTool(), ReadFileTool(), WriteFileTool(), EditFileTool(), ReadSkillTool())
_BY_NAME = {tool.name: tool for tool in TOOLS}
_SPECS = [tool.spec() for tool in TOOLS]


def get(name: str) -> Tool | None:
    return _BY_NAME.get(name)


def specs() -> list[dict]:
    return _SPECS
