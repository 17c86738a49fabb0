"""One wire-error type with a factory per code. Exceptions become wire errors in endpoint.py only."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
AUTH_REQUIRED = -32000
REQUEST_CANCELLED = -32800


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: object = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    @classmethod
    def parse_error(cls, detail: str = "") -> "RpcError":
        return cls(PARSE_ERROR, "Parse error" + (f": {detail}" if detail else ""))

    @classmethod
    def invalid_request(cls, detail: str = "") -> "RpcError":
        return cls(INVALID_REQUEST, "Invalid request" + (f": {detail}" if detail else ""))

    @classmethod
    def method_not_found(cls, method: str) -> "RpcError":
        return cls(METHOD_NOT_FOUND, f"Method not found: {method}")

    @classmethod
    def invalid_params(cls, detail: str, data: object = None) -> "RpcError":
        return cls(INVALID_PARAMS, f"Invalid params: {detail}", data)

    @classmethod
    def internal_error(cls, detail: str = "", data: object = None) -> "RpcError":
        return cls(INTERNAL_ERROR, "Internal error" + (f": {detail}" if detail else ""), data)

    @classmethod
    def server_busy(cls) -> "RpcError":
        return cls(INTERNAL_ERROR, "Internal error: server busy, request refused; retry later")

    @classmethod
    def request_cancelled(cls) -> "RpcError":
        return cls(REQUEST_CANCELLED, "Request cancelled")

    @classmethod
    def auth_required(cls) -> "RpcError":
        return cls(AUTH_REQUIRED, "Authentication required")


class PeerError(Exception):
    """The peer answered one of our requests with an error, or with something that is no valid
    answer. `error`: the error object it sent, or a string saying what was wrong."""

    def __init__(self, error: object):
        super().__init__(error)
        self.error = error
