"""The stop reasons of a turn: the one vocabulary the engine and the ACP layer share."""

END_TURN = "end_turn"
CANCELLED = "cancelled"
REFUSAL = "refusal"  # no model is configured
MAX_TURN_REQUESTS = "max_turn_requests"  # limits.maxModelCalls reached
MAX_TOKENS = "max_tokens"  # the model stopped at its token limit: its reply is partial
