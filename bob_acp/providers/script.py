"""The `script` provider: a deterministic model that plays a YAML (or JSON) file of replies.

Stateless: the reply is derived from the messages alone, so a reloaded session goes on where
it was. See the README's "The script provider" for the format.
"""

from __future__ import annotations

import os
import re
import threading
from typing import TYPE_CHECKING, Any, Callable, Iterator

from bob_acp import jsontext
from bob_acp.cancel import Cancel
from bob_acp.context import history
from bob_acp.exceptions import Cancelled, ModelError
from bob_acp.providers.base import ModelReply, Stream, ToolCall, Usage

if TYPE_CHECKING:
    from bob_acp.config import ModelSettings


NO_MORE = {"text": "(script: no more replies)"}
CANCEL_CHECK_EVERY = 256


class ScriptProvider:
    name = "script"

    def __init__(self, settings: ModelSettings):
        if not settings.script:
            raise ValueError("the script provider needs model.script")  # (make_provider checks it first)
        self.path: str = settings.script
        self._lock = threading.Lock()
        self._cache: tuple[float, dict[str, Any]] | None = None

    def generate(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], stream: Stream, cancel: Cancel,
                 model: str | None = None, reasoning: str | None = None) -> ModelReply:
        script = self._load()
        turn_index, turn = _choose_turn(script, messages)
        replies = turn.get("replies", []) if turn is not None else []
        k = _replies_so_far(messages)
        reply = replies[k] if k < len(replies) else (script.get("fallback") or NO_MORE)
        return self._play(reply, turn_index, k, stream, cancel)

    def _load(self) -> dict[str, Any]:
        try:
            mtime = os.stat(self.path).st_mtime
        except OSError as exc:
            raise ModelError(f"script {self.path}: cannot read: {exc.strerror}") from None
        with self._lock:
            if self._cache is None or self._cache[0] != mtime:
                self._cache = (mtime, _parse(self.path))
            return self._cache[1]

    def _play(self, reply: dict[str, Any], turn: int, k: int, stream: Stream, cancel: Cancel) -> ModelReply:
        delay = float(reply.get("delay", 0) or 0)
        if reply.get("wait") and cancel.wait(float(reply["wait"])):  # a model that takes its time to start
            raise Cancelled()
        for i, thought in enumerate(reply.get("thoughts") or []):
            if delay and i and cancel.wait(delay):
                raise Cancelled()
            stream.thought(str(thought))
        parts: list[str] = []
        for i, chunk in enumerate(_chunks(reply)):
            if delay and i and cancel.wait(delay):
                raise Cancelled()
            if i % CANCEL_CHECK_EVERY == 0 and cancel.is_set():
                raise Cancelled()
            parts.append(chunk)
            stream.text(chunk)
        if cancel.is_set():
            raise Cancelled()
        if "error" in reply:
            raise ModelError(str(reply["error"]))
        calls = [ToolCall(f"script_{turn}_{k}_{i}", c["name"], dict(c.get("arguments") or {}))
                 for i, c in enumerate(reply.get("tool_calls") or [])]
        usage = reply.get("usage") or {}
        return ModelReply("".join(parts), calls, usage=Usage(usage.get("input_tokens"), usage.get("output_tokens")))


def _chunks(reply: dict[str, Any]) -> Iterator[str]:
    if "text" in reply and reply["text"] is not None:
        yield str(reply["text"])
    for chunk in reply.get("chunks") or []:
        yield str(chunk)
    repeat = reply.get("repeat")
    if repeat:
        chunk = str(repeat.get("chunk", ""))
        for _ in range(int(repeat.get("count", 0))):
            yield chunk


def _latest_user(messages: list[dict[str, Any]]) -> tuple[str, int]:
    """The text of the last non-summary user message and the number of such messages."""
    texts = [history.text_of(m) for m in messages if m["role"] == "user" and not m.get("summary")]
    return (texts[-1] if texts else ""), len(texts)


def _replies_so_far(messages: list[dict[str, Any]]) -> int:
    count = 0
    for message in reversed(messages):
        if message["role"] == "user":
            break
        if message["role"] == "assistant":
            count += 1
    return count


def _matches(pattern: str, text: str) -> bool:
    if len(pattern) >= 2 and pattern.startswith("/") and pattern.endswith("/"):
        return re.search(pattern[1:-1], text) is not None
    return pattern.lower() in text.lower()


def _choose_turn(script: dict[str, Any], messages: list[dict[str, Any]]) -> tuple[int, dict[str, Any] | None]:
    text, ordinal = _latest_user(messages)
    turns = script["turns"]
    for i, turn in enumerate(turns):
        if turn.get("match") is not None and _matches(str(turn["match"]), text):
            return i, turn
    unmatched = [(i, t) for i, t in enumerate(turns) if t.get("match") is None]
    if not unmatched:
        return -1, None
    return unmatched[min(max(ordinal, 1), len(unmatched)) - 1]


def _parse(path: str) -> dict[str, Any]:
    import yaml

    def bad(problem: str) -> ModelError:
        return ModelError(f"script {path}: {problem}")

    try:
        if path.endswith(".json"):  # large scripts (benchmarks) load in milliseconds
            with open(path, "rb") as raw:
                data = jsontext.loads(raw.read())
        else:
            with open(path, encoding="utf-8") as text:  # (libyaml's loader where there is one: a hundred times faster)
                data = jsontext.clean_tree(yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    except (OSError, UnicodeDecodeError) as exc:
        raise bad(f"cannot read: {exc}") from None
    except (ValueError, RecursionError) as exc:  # orjson's decode error
        raise bad(f"invalid JSON: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise bad("invalid YAML" + (f" at line {mark.line + 1}" if mark else "")) from None
    if not isinstance(data, dict) or not isinstance(data.get("turns", []), list):
        raise bad("must be a mapping with a list of `turns`")
    data.setdefault("turns", [])
    for t, turn in enumerate(data["turns"]):
        if not isinstance(turn, dict) or not isinstance(turn.get("replies", []), list):
            raise bad(f"turn {t + 1}: must be a mapping with a list of `replies`")
        for r, reply in enumerate(turn.get("replies", [])):
            _check_reply(reply, f"turn {t + 1}, reply {r + 1}", bad)
    if data.get("fallback") is not None:
        _check_reply(data["fallback"], "fallback", bad)
    return data


def _check_reply(reply: object, where: str, bad: Callable[[str], ModelError]) -> None:
    if not isinstance(reply, dict):
        raise bad(f"{where}: must be a mapping")
    if not isinstance(reply.get("chunks", []), list):
        raise bad(f"{where}: chunks must be a list")
    if not isinstance(reply.get("thoughts", []), list):
        raise bad(f"{where}: thoughts must be a list")
    usage = reply.get("usage") or {}
    if not isinstance(usage, dict) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                              for v in usage.values()):
        raise bad(f"{where}: usage must map input_tokens/output_tokens to whole numbers")
    repeat = reply.get("repeat")
    if repeat is not None and (not isinstance(repeat, dict) or not isinstance(repeat.get("count", 0), int)):
        raise bad(f"{where}: repeat needs {{chunk, count}}")
    for key in ("delay", "wait"):
        if not isinstance(reply.get(key, 0) or 0, (int, float)):
            raise bad(f"{where}: {key} must be a number of seconds")
    calls = reply.get("tool_calls") or []
    if not isinstance(calls, list):
        raise bad(f"{where}: tool_calls must be a list")
    for call in calls:
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise bad(f"{where}: a tool call needs a name")
        if not isinstance(call.get("arguments") or {}, dict):
            raise bad(f"{where}: tool call arguments must be a mapping")
