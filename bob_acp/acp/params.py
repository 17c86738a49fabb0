"""Checks of the params every room of the ACP layer shares: they name the field they refuse."""

from __future__ import annotations

import os

from bob_acp.jsonrpc.errors import RpcError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def unknown_session(sid: str, reason: str = "") -> RpcError:
    data: dict[str, Any] = {"sessionId": sid}
    if reason:
        data["error"] = reason
    return RpcError.invalid_params(f"session not found: {sid[:100]}", data=data)


def required_str(params: dict[str, Any], name: str) -> str:
    value = params.get(name)
    if not isinstance(value, str):
        raise RpcError.invalid_params(f"{name}: {'required' if value is None else 'must be a string'}")
    return value


def cwd_param(params: dict[str, Any]) -> str:
    return _folder(required_str(params, "cwd"), "cwd")


def _folder(path: str, name: str) -> str:
    if not os.path.isabs(path):
        raise RpcError.invalid_params(f"{name}: must be an absolute path, got {path[:200]!r}")
    if "\0" in path or not os.path.isdir(path):
        raise RpcError.invalid_params(f"{name}: not a directory: {path[:200]!r}")
    return os.path.normpath(path)


MAX_ROOTS = 64


def more_roots(params: dict[str, Any], wanted: bool) -> list[str] | None:
    """`additionalDirectories` (acp.additionalDirectories), each checked like `cwd`; None when
    the request has none (or the feature is off: the field is then ignored, as before)."""
    value = params.get("additionalDirectories")
    if not wanted or value is None:
        return None
    if not isinstance(value, list):
        raise RpcError.invalid_params("additionalDirectories: must be an array of absolute paths")
    if len(value) > MAX_ROOTS:
        raise RpcError.invalid_params(f"additionalDirectories: at most {MAX_ROOTS} folders")
    roots = []
    for index, path in enumerate(value):
        if not isinstance(path, str):
            raise RpcError.invalid_params(f"additionalDirectories[{index}]: must be a string")
        roots.append(_folder(path, f"additionalDirectories[{index}]"))
    return roots


def mcp_servers(params: dict[str, Any]) -> list[Any]:
    servers = params.get("mcpServers", [])
    if not isinstance(servers, list):
        raise RpcError.invalid_params("mcpServers: must be an array")
    return servers
