// An editor on the official TypeScript SDK (@agentclientprotocol/sdk): it starts the agent
// command given on its argv (`nua acp …`), opens a session, prompts the demo task and
// leaves the permission dialog open until the agent withdraws it (`$/cancel_request`,
// which this SDK turns into an aborted request). One JSON line per event on stdout, for
// tests/protocols/test_acp.py to follow: asked, withdrawn, stop.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { client, ndJsonStream, PROTOCOL_VERSION } from "@agentclientprotocol/sdk";

const [command, ...args] = process.argv.slice(2);
const agent = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });
const stream = ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));
const say = (event) => process.stdout.write(JSON.stringify(event) + "\n");

const editor = client({ name: "opennua-test-editor" }).onRequest(
  "session/request_permission",
  ({ params, signal, requestId }) =>
    new Promise((_resolve, reject) => {
      say({
        event: "asked",
        rpcId: requestId,
        requestId: params._meta?.["opennua/requestId"],
        toolCallId: params.toolCall.toolCallId,
        options: params.options.map((o) => o.optionId),
      });
      signal.addEventListener("abort", () => {
        say({ event: "withdrawn", rpcId: requestId });
        reject(signal.reason);
      });
    }),
);

await editor.connectWith(stream, async (ctx) => {
  await ctx.request("initialize", { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} });
  await ctx.buildSession(process.cwd()).withSession(async (session) => {
    say({ event: "session", sessionId: session.sessionId });
    const response = await session.prompt("Write a short report");
    say({ event: "stop", stopReason: response.stopReason });
  });
});
agent.stdin.end();
await new Promise((resolve) => agent.on("exit", resolve));
say({ event: "exit", code: agent.exitCode });
