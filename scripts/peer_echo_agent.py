"""The yardstick for "a Python ACP agent": a minimal echo agent on the official SDK
(`agent-client-protocol`, asyncio). scripts/bench.py runs it beside Bob.

A prompt `stream N` answers with N one-character chunks; anything else is echoed back.
"""

import asyncio

import acp
from acp import schema


class EchoAgent:
    def on_connect(self, conn):
        self.conn = conn

    async def initialize(self, protocol_version, client_capabilities=None, client_info=None, **kwargs):
        return schema.InitializeResponse(protocol_version=1, agent_capabilities=schema.AgentCapabilities(),
                                         agent_info=schema.Implementation(name="peer-echo", version="1"))

    async def authenticate(self, method_id, **kwargs):
        return schema.AuthenticateResponse()

    async def new_session(self, cwd, additional_directories=None, mcp_servers=None, **kwargs):
        return schema.NewSessionResponse(session_id="peer-session")

    async def prompt(self, session_id, prompt, **kwargs):
        text = "".join(getattr(block, "text", "") or "" for block in prompt)
        if text.startswith("stream "):
            for _ in range(int(text.split()[1])):
                await self.conn.session_update(session_id, acp.update_agent_message_text("x"))
        else:
            await self.conn.session_update(session_id, acp.update_agent_message_text("you said: " + text))
        return schema.PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id, **kwargs):
        return None


if __name__ == "__main__":
    asyncio.run(acp.run_agent(EchoAgent()))
