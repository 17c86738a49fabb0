"""ask_user (with `tools.askUser`): the model asks the user a question and reads the answer as
the call's result. Where it is asked is the client's business (bob_acp.acp.updates: a form the
editor shows, the chat's prompt, or a choice among options); a question no one can answer says
so, and the model asks in its reply instead. Never asks permission: it touches nothing."""

from __future__ import annotations

from typing import Any

from bob_acp.cancel import Cancel
from bob_acp.jsontext import clean
from bob_acp.tools.base import Tool, ToolContext, ToolResult

NAME = "ask_user"
MAX_QUESTION = 2000
MAX_OPTIONS = 10
MAX_OPTION = 200


class AskUserTool(Tool):
    name = NAME
    changes_files = False
    kind = "other"
    needs_permission = False
    description = (
        "Ask the user a question and wait for the answer, when you cannot go on well without it (a choice only "
        "they can make, a fact only they know). Give `options` when the answer is one of a few choices. Do not "
        "ask what you can find out yourself."
    )
    parameters = {
        "type": "object",
        "properties": {
            "question": {"type": "string", "description": "The question, in one or two sentences."},
            "options": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_OPTIONS,
                        "description": "The answers to choose from (optional; without them the user types one)."},
        },
        "required": ["question"],
        "additionalProperties": False,
    }

    def title(self, args: dict[str, Any]) -> str:
        question = args.get("question")
        return f"{NAME}: {' '.join(question.split())[:200]}" if isinstance(question, str) else NAME

    def run(self, args: dict[str, Any], ctx: ToolContext, cancel: Cancel) -> ToolResult:
        asked = question_of(args)
        if isinstance(asked, str):
            return ToolResult(f"error: {asked}", failed=True)
        if ctx.ask is None:
            return ToolResult("error: there is no one to ask here: ask in your reply instead", failed=True)
        answer = ctx.ask(*asked)
        return ToolResult(answer.text, failed=answer.failed)


def question_of(args: dict[str, Any]) -> tuple[str, list[str]] | str:
    """(the question, its options), or what is wrong with the arguments."""
    question = args.get("question")
    if not isinstance(question, str) or not question.strip():
        return "argument 'question' must be a non-empty string"
    options = args.get("options") or []
    if not isinstance(options, list) or not all(isinstance(o, str) and o.strip() for o in options):
        return "argument 'options' must be a list of non-empty strings"
    if len(options) > MAX_OPTIONS:
        return f"at most {MAX_OPTIONS} options"
    chosen = list(dict.fromkeys(" ".join(clean(o).split())[:MAX_OPTION] for o in options))
    return clean(question.strip())[:MAX_QUESTION], chosen
