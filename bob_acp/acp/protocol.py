"""ACP v1 names and frame builders: every session/update Bob writes is built here.

No frame Bob writes exceeds the frame cap it enforces on input (4 MiB): texts and diffs are
bounded here (a long text keeps its head and tail; a large diff becomes the changed region).
"""

from __future__ import annotations

import os

from bob_acp import jsontext

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PROTOCOL_VERSION = 1

INITIALIZE = "initialize"
AUTHENTICATE = "authenticate"
SESSION_NEW = "session/new"
SESSION_LOAD = "session/load"
SESSION_PROMPT = "session/prompt"
SESSION_CANCEL = "session/cancel"
SESSION_UPDATE = "session/update"
SESSION_LIST = "session/list"
SESSION_RESUME = "session/resume"
SESSION_CLOSE = "session/close"
SESSION_DELETE = "session/delete"
SESSION_FORK = "session/fork"  # (unstable: the draft schema's; with acp.fork)
SESSION_SET_MODE = "session/set_mode"
SESSION_SET_CONFIG_OPTION = "session/set_config_option"
SESSION_STEERING = "_session/steering"  # (an extension, as codex-acp and claude-agent-acp have it; acp.steering)
LOGOUT = "logout"
ELICITATION_CREATE = "elicitation/create"
REQUEST_PERMISSION = "session/request_permission"
RETRY_EVENT = "_bob/retry"  # an extension notification (to a client that asked for it: `_meta.bob.retries`)
# Answered "method not found" unless a config key turns them on (the product document's list).
NOT_SUPPORTED = (
    SESSION_SET_MODE,
    SESSION_SET_CONFIG_OPTION,
    SESSION_LIST,
    SESSION_RESUME,
    SESSION_CLOSE,
    LOGOUT,
)

ALLOW, ALLOW_ALWAYS, REJECT = "allow", "allow_always", "reject"
ALLOW_PROJECT, REJECT_PROJECT = "allow_project", "reject_project"  # (permissions.projectRules)
# Characters of one text in a frame: even at 6 bytes a character (JSON escapes), a frame's two
# texts (a content and rawOutput, or a diff's old and new) stay under the 4 MiB frame cap.
MAX_TEXT = 256 * 1024
DIFF_CONTEXT = 3  # unchanged lines kept around a summarised diff's changed region
MAX_PATH = 4096  # characters of a path or title in a frame (PATH_MAX)
# rawInput: the model's arguments as the client sees them. The model and the session file keep
# them whole; a frame gets each string within MAX_INPUT_TEXT characters, and all of them within
# MAX_INPUT characters, saying what was cut, so the frame stays far under the cap.
MAX_INPUT_TEXT = 64 * 1024
MAX_INPUT = 256 * 1024
LANGUAGES = {".py": "python", ".js": "javascript", ".mjs": "javascript", ".ts": "typescript", ".tsx": "tsx",
             ".jsx": "jsx", ".rs": "rust", ".go": "go", ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp",
             ".hpp": "cpp", ".java": "java", ".kt": "kotlin", ".rb": "ruby", ".sh": "sh", ".bash": "bash",
             ".zsh": "zsh", ".json": "json", ".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".md": "markdown",
             ".html": "html", ".css": "css", ".sql": "sql", ".lua": "lua", ".el": "elisp", ".php": "php",
             ".swift": "swift", ".cs": "csharp", ".xml": "xml", ".ini": "ini", ".cfg": "ini", ".txt": "text"}


def permission_options(scope: str | None, project: str | None = None) -> list[dict[str, Any]]:
    """`scope`: what allow_always covers, as the user reads it (a tool name, or a command);
    None: the call cannot be remembered, so no allow_always is offered. `project`: what a rule
    for the project would cover (permissions.projectRules: "`npm test …`", "write_file in src/"),
    offered as "Always … in this project" and "Never … in this project"."""
    options = [{"optionId": ALLOW, "name": "Allow", "kind": "allow_once"}]
    if scope is not None:
        options.append({"optionId": ALLOW_ALWAYS, "name": f"Always allow {scope} in this session",
                        "kind": "allow_always"})
    if project is not None:
        options.append({"optionId": ALLOW_PROJECT, "name": f"Always allow {project} in this project",
                        "kind": "allow_always"})
    options.append({"optionId": REJECT, "name": "Reject", "kind": "reject_once"})
    if project is not None:
        options.append({"optionId": REJECT_PROJECT, "name": f"Never allow {project} in this project",
                        "kind": "reject_always"})
    return options


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": bounded(text)}


def agent_chunk(text: str, message_id: str | None = None) -> dict[str, Any]:
    return _chunk("agent_message_chunk", text, message_id)


def thought_chunk(text: str, message_id: str | None = None) -> dict[str, Any]:
    return _chunk("agent_thought_chunk", text, message_id)


def user_chunk(text: str, message_id: str | None = None) -> dict[str, Any]:
    return _chunk("user_message_chunk", text, message_id)


def _chunk(kind: str, text: str, message_id: str | None) -> dict[str, Any]:
    frame = {"sessionUpdate": kind, "content": text_block(text)}
    if message_id:
        frame["messageId"] = message_id
    return frame


def commands_update(commands: list[dict[str, Any]]) -> dict[str, Any]:
    return {"sessionUpdate": "available_commands_update", "availableCommands": commands}


def usage_update(used: int, size: int, cost: float | None = None) -> dict[str, Any]:
    frame: dict[str, Any] = {"sessionUpdate": "usage_update", "used": max(0, int(used)), "size": max(0, int(size))}
    if cost is not None:
        frame["cost"] = {"amount": round(cost, 6), "currency": "USD"}
    return frame


def notice(title: str, description: str | None = None, severity: str = "warning") -> dict[str, Any]:
    """A `notice` update (only to a client that advertised `session.notices`)."""
    frame: dict[str, Any] = {"sessionUpdate": "notice", "severity": severity, "title": bounded(title, MAX_PATH) or "Bob"}
    if description:
        frame["description"] = bounded(description)
    return frame


def compaction_update(compaction_id: str, status: str, error: str | None = None) -> dict[str, Any]:
    """A `compaction_update` (only to a client that advertised `session.compaction`)."""
    frame: dict[str, Any] = {"sessionUpdate": "compaction_update", "compactionId": compaction_id, "status": status}
    if error:
        frame["error"] = bounded(error)
    return frame


def compaction_summary_chunk(compaction_id: str, text: str) -> dict[str, Any]:
    """A piece of a compaction's summary (only to a client that advertised `session.compaction`)."""
    return {"sessionUpdate": "compaction_summary_chunk", "compactionId": compaction_id,
            "content": {"type": "text", "text": bounded(text)}}


def session_info_update(title: str | None = None, updated_at: str | None = None) -> dict[str, Any]:
    frame: dict[str, Any] = {"sessionUpdate": "session_info_update"}
    if title is not None:
        frame["title"] = title
    if updated_at is not None:
        frame["updatedAt"] = updated_at
    return frame


def text_content(text: str) -> dict[str, Any]:
    return {"type": "content", "content": text_block(text)}


def fenced(text: str, language: str = "") -> str:
    """`text` as a Markdown code block whose fence is longer than any run of backticks inside,
    so shell output with `#`, `*`, `_` or `<tag>` is shown as it is."""
    import re  # lazy: start-up does not fence anything

    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    body = bounded(text)
    return f"{fence}{language}\n{body}{'' if body.endswith(chr(10)) else chr(10)}{fence}"


def language_of(path: str) -> str:
    return LANGUAGES.get(os.path.splitext(path)[1].lower(), "")


def diff_content(path: str, old_text: str | None, new_text: str) -> dict[str, Any]:
    """A diff (a new file has no oldText at all: clients that get null skip or break on it)."""
    old_text, new_text = bounded_diff(old_text, new_text)
    frame = {"type": "diff", "path": path, "newText": new_text}
    if old_text is not None:
        frame["oldText"] = old_text
    return frame


def terminal_content(terminal_id: str) -> dict[str, Any]:
    return {"type": "terminal", "terminalId": terminal_id}


def location(path: str, line: int | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {"path": bounded(path, MAX_PATH)}
    if line is not None:
        found["line"] = line
    return found


def tool_call(ref: str, title: str, kind: str, raw_input: dict[str, Any], locations: list[dict[str, Any]], status: str = "pending",
              content: list[dict[str, Any]] | None = None, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    frame = {
        "sessionUpdate": "tool_call",
        "toolCallId": ref,
        "title": bounded(title, 4096),
        "kind": kind,
        "status": status,
        "rawInput": bounded_input(raw_input),
    }
    if locations:
        frame["locations"] = locations
    if content:
        frame["content"] = content
    if meta:
        frame["_meta"] = meta
    return frame


def tool_call_update(ref: str, status: str | None = None, content: list[dict[str, Any]] | None = None,
                     raw_output: dict[str, Any] | None = None, meta: dict[str, Any] | None = None,
                     title: str | None = None) -> dict[str, Any]:
    frame: dict[str, Any] = {"sessionUpdate": "tool_call_update", "toolCallId": ref}
    if status is not None:
        frame["status"] = status
    if title is not None:
        frame["title"] = bounded(title, 4096)
    if content is not None:
        frame["content"] = content
    if raw_output is not None:
        frame["rawOutput"] = raw_output
    if meta:
        frame["_meta"] = meta
    return frame


def tool_request(ref: str, title: str, kind: str, raw_input: dict[str, Any], locations: list[dict[str, Any]],
                 content: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The toolCall of a permission request (a ToolCallUpdate)."""
    frame = {"toolCallId": ref, "title": bounded(title, 4096), "kind": kind, "status": "pending",
             "rawInput": bounded_input(raw_input)}
    if locations:
        frame["locations"] = locations
    if content:
        frame["content"] = content
    return frame


def bounded_input(value: object) -> Any:
    """A tool call's arguments for a frame: each string within MAX_INPUT_TEXT characters (head
    and tail around a marker) and, past MAX_INPUT characters in all, a note in their place."""
    budget = [MAX_INPUT]

    def walk(item: object, depth: int) -> Any:
        if isinstance(item, str):
            shown = bounded(item, MAX_INPUT_TEXT)
            budget[0] -= len(shown)
            return shown
        budget[0] -= 8
        if depth > 32:
            return "[… nested too deep, not shown …]"
        if isinstance(item, dict):
            return {str(key)[:MAX_PATH]: walk(v, depth + 1) for key, v in item.items()}
        if isinstance(item, list):
            return [walk(v, depth + 1) for v in item]
        return item

    shown = walk(value, 0)
    if budget[0] >= 0:
        return shown
    size = len(jsontext.dumps(value))
    return {"_bob": f"[the arguments ({size} bytes of JSON) are too large to show here; the model's call holds "
                    f"them whole]"}


def bounded(text: str, limit: int = MAX_TEXT) -> str:
    """At most `limit` characters: the head and the tail around a marker of what was cut."""
    if len(text) <= limit:
        return text  # (ill-formed Unicode is cleaned when the frame is encoded)
    text = jsontext.clean(text)
    half = limit // 2
    return f"{text[:half]}\n[… {len(text) - 2 * half} characters cut …]\n{text[-half:]}"


def bounded_diff(old: str | None, new: str, limit: int = MAX_TEXT) -> tuple[str | None, str]:
    """The diff's two texts, or, past `limit`, only the changed region with a few lines of
    context on each side and a line saying how many unchanged lines were left out."""
    if len(old or "") <= limit and len(new) <= limit:
        return old, new
    if old is None:
        return None, bounded(new, limit)
    old_lines, new_lines = old.splitlines(keepends=True), new.splitlines(keepends=True)
    start = 0
    while start < min(len(old_lines), len(new_lines)) and old_lines[start] == new_lines[start]:
        start += 1
    end = 0
    while (end < min(len(old_lines), len(new_lines)) - start
           and old_lines[-1 - end] == new_lines[-1 - end]):
        end += 1
    first = max(0, start - DIFF_CONTEXT)
    keep_end = max(0, end - DIFF_CONTEXT)

    def region(lines: list[str]) -> str:
        body = "".join(lines[first:len(lines) - keep_end])
        head = f"[… {first} unchanged line(s) …]\n" if first else ""
        tail = f"[… {keep_end} unchanged line(s) …]\n" if keep_end else ""
        return head + bounded(body, limit - 200) + ("\n" if tail and not body.endswith("\n") else "") + tail

    return region(old_lines), region(new_lines)
