// @ag-ui/client's HttpAgent driven line by line, for tests/protocols/_agui.py: each line
// on stdin is a command {id, cmd, ...}; each reply is one JSON line {id, ...} on stdout.
// Agents live across commands, keeping their messages, state and pending interrupts
// between runs as a frontend's agent does.
//
//   {cmd: "agent", name, url, token, threadId}   make an agent
//   {cmd: "run", name, message?, resume?, runId?, slow?, dropInterrupts?, tools?,
//        toolResult?}  start a run (reply at once); `resume`: {interruptId | "*": payload |
//       "cancel"}; `slow`: ms to wait per event; `tools`: the frontend's tools;
//       `toolResult`: the frontend ran the last tool call the agent holds and this is its
//       result (sent as a ToolMessage)
//   {cmd: "wait", name}    reply when the agent's run ends: its events and outcome
//   {cmd: "abort", name}   the client goes away mid-run (reply when it is gone)
//   {cmd: "view", name}    the agent's messages, state and pending interrupts now
import { createInterface } from "node:readline";
import { HttpAgent, randomUUID } from "@ag-ui/client";

const agents = new Map();
// A stream cut by a dying server rejects a promise inside the client that nobody awaits
// (undici's `terminated`); a browser logs it and goes on, and so does this process.
process.on("unhandledRejection", (e) => process.stderr.write(`unhandled: ${e}\n`));

function reply(id, body) {
  process.stdout.write(JSON.stringify({ id, ...body }) + "\n");
}

function view(a) {
  return {
    messages: a.agent.messages,
    state: a.agent.state,
    pendingInterrupts: a.agent.pendingInterrupts,
    running: a.running !== null,
  };
}

function start(a, cmd) {
  // A frontend that learned its interrupts were answered elsewhere (or that sends a new
  // message instead) drops them; the client refuses a run that leaves them unanswered.
  if (cmd.dropInterrupts) a.agent.pendingInterrupts = [];
  const result = { events: [], outcome: null, interrupts: [], error: null };
  const controller = new AbortController();
  const params = { runId: cmd.runId ?? randomUUID(), abortController: controller };
  if (cmd.message !== undefined) {
    a.agent.addMessage({ id: cmd.messageId ?? randomUUID(), role: "user", content: cmd.message });
  }
  if (cmd.tools !== undefined) params.tools = cmd.tools;
  if (cmd.toolResult !== undefined) {
    // What a frontend does with a call of its own tool: run it, add the result, run again.
    const calls = a.agent.messages.flatMap((m) => (m.role === "assistant" ? m.toolCalls ?? [] : []));
    const call = calls[calls.length - 1];
    a.agent.addMessage({ id: randomUUID(), role: "tool", toolCallId: call.id, content: cmd.toolResult });
  }
  if (cmd.resume !== undefined) {
    params.resume = a.agent.pendingInterrupts.map((it) => {
      const answer = cmd.resume[it.id] ?? cmd.resume["*"];
      return answer === "cancel"
        ? { interruptId: it.id, status: "cancelled" }
        : { interruptId: it.id, status: "resolved", payload: answer };
    });
  }
  const subscriber = {
    async onEvent({ event }) {
      result.events.push(event);
      if (cmd.slow) await new Promise((r) => setTimeout(r, cmd.slow));
    },
    onRunFinishedEvent(p) {
      result.outcome = p.outcome;
      if (p.outcome === "interrupt") result.interrupts = p.interrupts;
    },
    onRunErrorEvent({ event }) {
      result.error = { code: event.code ?? null, message: event.message };
    },
  };
  a.controller = controller;
  a.running = a.agent
    .runAgent(params, subscriber)
    .catch((e) => {
      if (!controller.signal.aborted) {
        result.error = { code: e.status ? `http_${e.status}` : "client_error", message: e.message, payload: e.payload ?? null };
      }
    })
    .then(() => {
      a.running = null;
      return result;
    });
  a.last = a.running;
}

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  const cmd = JSON.parse(line);
  const a = agents.get(cmd.name);
  try {
    switch (cmd.cmd) {
      case "agent":
        agents.set(cmd.name, {
          agent: new HttpAgent({ url: cmd.url, headers: { Authorization: `Bearer ${cmd.token}` }, threadId: cmd.threadId }),
          running: null,
          last: null,
          controller: null,
        });
        reply(cmd.id, {});
        break;
      case "run":
        start(a, cmd);
        reply(cmd.id, {});
        break;
      case "wait":
        (a.running ?? a.last ?? Promise.resolve(null)).then((r) => reply(cmd.id, { result: r }));
        break;
      case "abort":
        a.controller?.abort();
        (a.running ?? Promise.resolve(null)).then(() => reply(cmd.id, {}));
        break;
      case "view":
        reply(cmd.id, view(a));
        break;
      default:
        reply(cmd.id, { failed: `unknown command ${cmd.cmd}` });
    }
  } catch (e) {
    reply(cmd.id, { failed: String(e && e.stack ? e.stack : e) });
  }
}
