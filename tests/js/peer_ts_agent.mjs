#!/usr/bin/env node
// The yardstick for "a TypeScript ACP agent": a minimal echo agent on the official TypeScript SDK
// (@agentclientprotocol/sdk, the package Bob's tests install in tests/js). scripts/bench.py runs
// it beside Bob and the Python SDK's agent.
//
// A prompt `stream N` answers with N one-character chunks; anything else is echoed back.
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const text = (prompt) => prompt.map((block) => (block.type === "text" ? block.text : "")).join("");
const chunk = (sessionId, piece) => ({
  sessionId,
  update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: piece } },
});

const app = acp
  .agent({ name: "peer-ts-echo" })
  .onRequest(acp.methods.agent.initialize, () => ({
    protocolVersion: acp.PROTOCOL_VERSION,
    agentCapabilities: {},
    agentInfo: { name: "peer-ts-echo", version: "1" },
    authMethods: [],
  }))
  .onRequest(acp.methods.agent.authenticate, () => ({}))
  .onRequest(acp.methods.agent.session.new, () => ({ sessionId: "peer-session" }))
  .onRequest(acp.methods.agent.session.prompt, async ({ params, client }) => {
    const said = text(params.prompt);
    if (said.startsWith("stream ")) {
      const count = Number(said.split(" ")[1]);
      for (let i = 0; i < count; i++) await client.notify(acp.methods.client.session.update, chunk(params.sessionId, "x"));
    } else {
      await client.notify(acp.methods.client.session.update, chunk(params.sessionId, "you said: " + said));
    }
    return { stopReason: "end_turn" };
  })
  .onNotification(acp.methods.agent.session.cancel, () => {});

const connection = app.connect(acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
await connection.closed;
process.exit(0);
