#!/usr/bin/env node
// An ACP client on the official TypeScript SDK (@agentclientprotocol/sdk 2.x), for Bob's
// end-to-end tests: spawns the agent, initializes, opens a session, sends one prompt, allows
// every tool call once, and prints one JSON line per event on stdout. The SDK validates what the
// agent sends and reports a frame it refuses on stderr: the test requires stderr to stay empty.
//
//   node sdk_client.mjs --cwd DIR --prompt TEXT -- AGENT [ARGS...]
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import path from "node:path";
import * as acp from "@agentclientprotocol/sdk";

const argv = process.argv.slice(2);
const sep = argv.indexOf("--");
const options = { cwd: process.cwd(), prompt: "Hello" };
for (let i = 0; i < sep; i++) {
  if (argv[i] === "--cwd") options.cwd = path.resolve(argv[++i]);
  else if (argv[i] === "--prompt") options.prompt = argv[++i];
}
const [command, ...args] = argv.slice(sep + 1);
const print = (event) => process.stdout.write(JSON.stringify(event) + "\n");

const agentProcess = spawn(command, args, { cwd: options.cwd, stdio: ["pipe", "pipe", "ignore"] });
const stream = acp.ndJsonStream(Writable.toWeb(agentProcess.stdin), Readable.toWeb(agentProcess.stdout));
const app = acp
  .client({ name: "bob-e2e-ts-sdk" })
  .onNotification(acp.methods.client.session.update, ({ params }) => print({ type: "update", update: params.update }))
  .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
    const option = params.options.find((o) => o.kind === "allow_once");
    print({ type: "permission", title: params.toolCall.title, content: params.toolCall.content ?? null });
    return { outcome: { outcome: "selected", optionId: option.optionId } };
  });

let code = 0;
try {
  await app.connectWith(stream, async (agent) => {
    const init = await agent.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
      clientInfo: { name: "bob-e2e-ts-sdk", version: "1" },
    });
    print({ type: "initialize", result: init });
    const session = await agent.request(acp.methods.agent.session.new, { cwd: options.cwd, mcpServers: [] });
    print({ type: "session", sessionId: session.sessionId });
    const result = await agent.request(acp.methods.agent.session.prompt, {
      sessionId: session.sessionId,
      prompt: [{ type: "text", text: options.prompt }],
    });
    print({ type: "stop", stopReason: result.stopReason });
  });
} catch (error) {
  code = 1;
  print({ type: "error", message: String(error?.message ?? error), data: error?.data ?? null });
} finally {
  agentProcess.stdin.end();
  const exited = new Promise((done) => (agentProcess.exitCode !== null ? done() : agentProcess.once("exit", done)));
  const timer = setTimeout(() => agentProcess.kill("SIGKILL"), 5000);
  await exited;
  clearTimeout(timer);
  print({ type: "agent_exit", code: agentProcess.exitCode });
  process.exit(code);
}
