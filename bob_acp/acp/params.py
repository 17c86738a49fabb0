"""Checks of the params every room of the ACP layer shares: they name the field they refuse."""

from __future__ import annotations

import os

from bob_acp.jsonrpc.errors import RpcError

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from typing import Any


def unknown_session(sid: str, reason: str = "") -> RpcError:
    data: dict[str, Any] = {"sessionId": sid}
    if reason:
        data["error"] = reason
    return RpcError.invalid_params(f"session not found: {sid[:100]}", data=data)


def required_str(params: dict, name: str) -> str:
    value = params.get(name)
    if not isinstance(value, str):
        raise RpcError.invalid_params(f"{name}: {'required' if value is None else 'must be a string'}")
    return value


def cwd_param(params: dict) -> str:
    cwd = required_str(params, "cwd")
    if not os.path.isabs(cwd):
        raise RpcError.invalid_params(f"cwd: must be an absolute path, got {cwd[:200]!r}")
    if "\0" in cwd or not os.path.isdir(cwd):
        raise RpcError.invalid_params(f"cwd: not a directory: {cwd[:200]!r}")
    return os.path.normpath(cwd)


def mcp_servers(params: dict) -> list:
    servers = params.get("mcpServers", [])
    if not isinstance(servers, list):
        raise RpcError.invalid_params("mcpServers: must be an array")
    return servers
