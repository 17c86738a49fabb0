"""The few exceptions that steer a turn. Shared by the engine, providers and tools."""


class BobError(Exception):
    """Base of Bob's own exceptions."""


class Cancelled(BobError):
    """The turn was cancelled (session/cancel, eviction or shutdown). Never an error on the wire."""


class ModelError(BobError):
    """The model call failed; str(self) is one line naming the cause, e.g. 'model API 401: invalid API key'."""


class ClientError(BobError):
    """The editor refused a request Bob made of it (a file write); str(self) is its one line."""


class ClientTimeout(ClientError):
    """The editor did not answer a request of Bob's within its time limit (acp.clientTimeout)."""


class ConfigError(BobError):
    """Bad configuration; str(self) is one line naming the key and the file."""
