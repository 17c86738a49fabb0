"""The agent engine: conversations, turns, /new and /compact; no JSON-RPC in here."""

from bob_acp.engine.calls import CANCELLED_RESULT, NOT_RUN, REJECTED, Call  # noqa: F401
from bob_acp.engine.conversation import Conversation, Refs  # noqa: F401
from bob_acp.engine.sink import Sink, TurnFailed, TurnStats  # noqa: F401
from bob_acp.engine.stops import CANCELLED, END_TURN, MAX_TOKENS, MAX_TURN_REQUESTS, REFUSAL  # noqa: F401
from bob_acp.engine.turn import Engine  # noqa: F401

__all__ = ["CANCELLED_RESULT", "NOT_RUN", "REJECTED", "Call", "Conversation", "Refs", "CANCELLED", "END_TURN", "MAX_TOKENS",
           "MAX_TURN_REQUESTS", "REFUSAL", "Engine", "Sink", "TurnFailed", "TurnStats"]
