"""JSON in and out, and text made valid Unicode: the one way Bob's layers read and write JSON
(session files, model streams, MCP, tool arguments) and clean text for a frame or a file.

The implementation is the transport's domain-free codec (bob_acp.jsonrpc.codec: the transport
may import nothing of Bob, so it cannot live here); the rest of Bob imports it from this leaf,
never from the transport.
"""

from __future__ import annotations

from bob_acp.jsonrpc.codec import (  # noqa: F401  (re-exported)
    OPT_INDENT_2,
    JSONDecodeError,
    clean,
    clean_tree,
    dumps,
    loads,
    use_orjson,
)

# (what it re-exports; what it defines itself is public as any module's)
__all__ = ["OPT_INDENT_2", "JSONDecodeError", "clean", "clean_tree", "dumps", "loads", "use_orjson"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def mapping(value: object) -> dict[str, Any]:
    """A JSON value that should be an object: itself, or {} for anything else (a peer's odd shape
    reads as absent, never as an error)."""
    return value if isinstance(value, dict) else {}


def decoded_size(base64_text: str) -> int:
    """The size in bytes of what base64 text decodes to (an image shown as a line, not its bytes)."""
    return max(0, len(base64_text) * 3 // 4 - base64_text[-2:].count("="))


def text_or(value: object, default: str = "") -> str:
    """A JSON value that should be a string: itself, or `default`."""
    return value if isinstance(value, str) else default
