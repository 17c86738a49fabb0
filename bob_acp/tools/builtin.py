"""The built-in tools, in the order they are offered to the model."""

from __future__ import annotations

from bob_acp.tools.ask import AskUserTool
from bob_acp.tools.base import Tool, ToolSet
from bob_acp.tools.bash import BashTool, SandboxedBashTool
from bob_acp.tools.files import EditFileTool, ReadFileTool, WriteFileTool
from bob_acp.tools.plan import PlanTool
from bob_acp.tools.skill import ReadSkillTool

TYPE_CHECKING = False
if TYPE_CHECKING:
    from bob_acp.config import Config

BUILTIN = ToolSet((BashTool(), ReadFileTool(), WriteFileTool(), EditFileTool(), ReadSkillTool()))
SANDBOXED = ToolSet((SandboxedBashTool(), *BUILTIN.tools[1:]))  # tools.sandbox on: bash may be run unconfined
TOOLS: tuple[Tool, ...] = BUILTIN.tools


def for_config(cfg: Config) -> ToolSet:
    """The built-in tools as this config offers them (the plan tool with tools.plan, ask_user
    with tools.askUser)."""
    chosen = SANDBOXED if cfg.tools.sandbox != "off" else BUILTIN
    more = [tool for tool, on in ((PLAN, cfg.tools.plan), (ASK_USER, cfg.tools.askUser)) if on]
    return chosen.plus(more) if more else chosen


PLAN = PlanTool()
ASK_USER = AskUserTool()
OPTIONAL = {PLAN.name: PLAN, ASK_USER.name: ASK_USER}
# Every name a built-in tool has (an MCP tool is never given one of them).
BUILTIN_NAMES: tuple[str, ...] = (*BUILTIN.names(), *OPTIONAL)


def get(name: str) -> Tool | None:
    return BUILTIN.get(name) or OPTIONAL.get(name)
