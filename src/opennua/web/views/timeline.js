// The cards of a timeline: one renderer per item kind (message, reasoning, tool call, input
// request, sub-agent, artifact, file change). A timeline is the reducer's ordered list of
// item refs, so live, reconnect and history draw the same cards in the same order.
//
// `ctx` carries what a card needs beyond its item: {turn, overlay, clientId, urls, act}.

import { details, h, reconcile, srOnly } from "./dom.js";
import {
  OUTCOME,
  PLAN_MARK,
  bytes,
  count,
  inputFields,
  optionName,
  preview,
  sumUsage,
  who,
} from "./format.js";

const own = (map, key) => (Object.prototype.hasOwnProperty.call(map, key) ? map[key] : undefined);

/** Entries for `reconcile` from a timeline (the turn's root run or a worker's). */
export function timelineEntries(timeline, ctx) {
  const entries = [];
  for (const ref of timeline) {
    // A model response's reasoning shares its message_id and is drawn inside the message's
    // card (above the answer it led to), so it has no entry of its own.
    if (ref.kind === "reasoning" && own(ctx.turn.messages, ref.id)) continue;
    const entry = ENTRY[ref.kind]?.(ref.id, ctx);
    if (entry) entries.push({ key: `${ref.kind}:${ref.id}`, ...entry });
  }
  return entries;
}

const ENTRY = {
  message(id, ctx) {
    const message = own(ctx.turn.messages, id);
    if (!message) return null;
    const reasoning = own(ctx.turn.reasoning, id) ?? null;
    return {
      sig: `${message.status}|${message.text}|${reasoning?.status}|${reasoning?.text}`,
      create: () => messageCard(message, reasoning, ctx),
    };
  },
  reasoning(id, ctx) {
    const reasoning = own(ctx.turn.reasoning, id);
    if (!reasoning) return null;
    return {
      sig: `${reasoning.status}|${reasoning.text}`,
      create: () => reasoningCard(reasoning),
    };
  },
  tool_call(id, ctx) {
    const call = own(ctx.turn.tool_calls, id);
    if (!call) return null;
    return { sig: JSON.stringify(call), create: () => toolCard(call, ctx) };
  },
  input_request(id, ctx) {
    const request = own(ctx.turn.input_requests, id);
    if (!request) return null;
    const pending = ctx.overlay.answerFor(id);
    const lost = ctx.overlay.lostTo(id);
    const call = request.tool_call_id ? own(ctx.turn.tool_calls, request.tool_call_id) : null;
    return {
      sig: JSON.stringify([request, pending, lost, call?.input]),
      create: () => requestCard(request, call ?? null, pending, lost, ctx),
    };
  },
  worker(id, ctx) {
    const worker = own(ctx.turn.workers, id);
    if (!worker) return null;
    // A worker card holds a timeline of its own: update it in place rather than rebuild.
    return {
      sig: ctx.token,
      create: () => workerShell(worker),
      update: (node) => updateWorker(node, worker, ctx),
    };
  },
  artifact(id, ctx) {
    const artifact = own(ctx.artifacts, id);
    if (!artifact) return null;
    return {
      sig: `${artifact.sha256}/${artifact.state}`,
      create: () => artifactCard(artifact, ctx),
    };
  },
  file_change(id, ctx) {
    const change = own(ctx.turn.file_changes, id);
    if (!change) return null;
    return { sig: "1", create: () => fileCard(change, ctx) };
  },
  workspace_restore(id, ctx) {
    const restore = own(ctx.turn.workspace_restores, id);
    if (!restore) return null;
    return { sig: "1", create: () => restoreCard(restore) };
  },
  mcp_unavailable(id, ctx) {
    const found = own(ctx.turn.unavailable_servers ?? {}, id);
    if (!found) return null;
    return { sig: "1", create: () => unavailableCard(found) };
  },
};

function messageCard(message, reasoning, ctx) {
  const streaming = message.status === "streaming";
  if (message.role === "user") {
    const trigger = ctx.turn.trigger ?? {};
    const mine = trigger.client_id && trigger.client_id === ctx.clientId;
    const from = mine ? "You" : `User${trigger.client_id ? ` via ${trigger.client_id}` : ""}`;
    return h(
      "li",
      { class: "item msg user", dataset: { kind: "message", role: "user" } },
      h("div", { class: "who" }, from),
      h("div", { class: "text" }, message.text),
    );
  }
  // A step that only called tools leaves an empty message: keep its slot (so order stays
  // keyed) and show its reasoning if it had any.
  const thought = reasoning ? reasoningBlock(reasoning) : null;
  if (!message.text && !streaming) {
    return h(
      "li",
      { class: "item response", hidden: !thought, dataset: { kind: "message", role: "assistant" } },
      thought,
    );
  }
  return h(
    "li",
    {
      class: `item msg assistant ${message.status}`,
      dataset: { kind: "message", role: "assistant", status: message.status },
      "aria-busy": streaming ? "true" : null,
    },
    thought,
    h("div", { class: "who" }, "Assistant"),
    h("div", { class: "text" }, message.text, streaming ? h("span", { class: "caret" }) : null),
    message.status === "interrupted"
      ? h("p", { class: "note" }, "Interrupted mid-answer.")
      : null,
  );
}

/** Reasoning, collapsed: the reader opens it when they want the why. */
function reasoningBlock(reasoning) {
  const label = { streaming: "Reasoning…", interrupted: "Reasoning (interrupted)" };
  return h(
    "div",
    { class: "reasoning" },
    details(
      `reasoning:${reasoning.message_id}`,
      false,
      label[reasoning.status] ?? "Reasoning",
      h("div", { class: "text" }, reasoning.text),
    ),
  );
}

function reasoningCard(reasoning) {
  return h("li", { class: "item", dataset: { kind: "reasoning" } }, reasoningBlock(reasoning));
}

function toolCard(call, ctx) {
  const output = call.output ?? "";
  return h(
    "li",
    {
      class: `item card tool status-${call.status}`,
      dataset: { kind: "tool_call", toolCallId: call.tool_call_id, status: call.status },
    },
    h(
      "div",
      { class: "card-head" },
      h("span", { class: `kind kind-${call.kind}` }, call.kind),
      h("span", { class: "title" }, call.title),
      h("code", { class: "name" }, call.name),
      h("span", { class: `badge status-${call.status}` }, call.status.replace("_", " ")),
    ),
    details(`input:${call.tool_call_id}`, false, "Input", h("pre", null, preview(call.input))),
    outputBlock(output, Boolean(call.output_ref)),
    call.output_ref
      ? h(
          "a",
          {
            class: "full-output",
            href: ctx.urls.toolOutput(call.tool_call_id),
            target: "_blank",
            rel: "noopener",
          },
          "Open the full output",
        )
      : null,
    call.error ? errorLine(call) : null,
  );
}

/** A failed call's error; a rejected one's is a person's decision, not an error. */
function errorLine(call) {
  if (call.status === "rejected") {
    return h("p", { class: "note rejected" }, call.error.message);
  }
  return h("p", { class: "error" }, h("code", null, call.error.code), " ", call.error.message);
}

/** A one-line result reads as a line; anything longer gets a scrollable block. */
function outputBlock(output, isPreview) {
  if (!output) return null;
  if (!isPreview && output.length <= 160 && !output.trimEnd().includes("\n")) {
    return h("p", { class: "output output-line" }, srOnly("Output: "), output);
  }
  return h(
    "div",
    { class: "output" },
    h("div", { class: "label" }, isPreview ? "Output (preview)" : "Output"),
    h("pre", null, preview(output, 2000)),
  );
}

function requestCard(request, call, pending, lost, ctx) {
  const open = request.status === "open";
  const promptId = `prompt-${request.request_id}`;
  const card = h(
    "li",
    {
      class: `item card request ${open ? "open" : "resolved"}`,
      "aria-labelledby": promptId,
      tabindex: "-1",
      dataset: { kind: "input_request", requestId: request.request_id, status: request.status },
    },
    h("div", { class: "card-head" }, open ? "Needs your input" : "Input request"),
    h("p", { class: "prompt", id: promptId }, request.prompt),
  );
  if (call) {
    // What the answer decides, whole: never cut, whitespace and hidden characters shown.
    const block = wholeInput(call);
    const key = `asked:${request.request_id}`;
    card.append(open ? block : details(key, false, "What was asked", block));
  }
  if (open && !ctx.act) {
    card.append(h("p", { class: "note" }, "Waiting for someone who may answer."));
  } else if (open) {
    const waiting = pending?.status === "sending";
    if (request.options?.length) {
      card.append(
        h(
          "div",
          { class: "options" },
          request.options.map((option) =>
            h(
              "button",
              {
                type: "button",
                class: `option ${option.kind.startsWith("allow") ? "allow" : "reject"}`,
                dataset: { optionId: option.option_id },
                disabled: waiting,
                "aria-label": `${option.name}: ${request.prompt}`,
                onclick: () => ctx.act.answer(request.request_id, { optionId: option.option_id }),
              },
              option.name,
            ),
          ),
        ),
      );
    } else {
      card.append(payloadForm(request, waiting, ctx));
    }
    if (waiting) card.append(h("p", { class: "note", role: "status" }, "Sending your answer…"));
    if (pending?.status === "conflict") {
      card.append(resolutionLine(request, pending.resolution, ctx));
    }
  } else {
    card.append(resolutionLine(request, request, ctx));
  }
  if (lost) {
    card.append(
      h(
        "p",
        { class: "note lost", dataset: { lost: "true" } },
        "Another client answered first; this is their answer, and yours was not applied.",
      ),
    );
  }
  return card;
}

/** A tool call's whole input, each argument in full, as a person must see it to decide. */
function wholeInput(call) {
  return h(
    "div",
    { class: "whole-input", dataset: { toolCallId: call.tool_call_id } },
    h("div", { class: "label" }, `${call.title || call.name} (${call.name}), the whole input:`),
    h(
      "dl",
      null,
      inputFields(call.input).map((field) => [
        h("dt", null, field.name),
        h("dd", null, h("pre", { class: "whole" }, field.value)),
      ]),
    ),
  );
}

/** "Allow — answered by cli_… (prn_…)" from a resolved request or a 409's resolution. */
function resolutionLine(request, resolution, ctx) {
  if (!resolution) return null;
  const outcome = OUTCOME[resolution.outcome] ?? resolution.outcome ?? "Resolved";
  let choice = "";
  if (resolution.option_id) choice = optionName(request, resolution.option_id);
  else if (resolution.payload !== null && resolution.payload !== undefined) {
    choice = preview(resolution.payload, 200);
  }
  const answered = resolution.answered_by;
  return h(
    "p",
    {
      class: "resolution",
      dataset: {
        outcome: resolution.outcome ?? "",
        optionId: resolution.option_id ?? "",
        answeredBy: answered?.client_id ?? "",
      },
    },
    h("strong", null, choice ? `${outcome}: ${choice}` : outcome),
    answered ? ` — answered by ${who(answered, ctx.clientId)}` : null,
  );
}

function payloadForm(request, waiting, ctx) {
  const wantsText = request.response_schema?.type === "string" || !request.response_schema;
  const id = `answer-${request.request_id}`;
  const field = h("textarea", { id, rows: 2, disabled: waiting });
  const submit = (event) => {
    event.preventDefault();
    let payload = field.value;
    if (!wantsText) {
      try {
        payload = JSON.parse(field.value);
      } catch {
        field.setCustomValidity("Enter JSON matching the requested schema");
        field.reportValidity();
        return;
      }
    }
    ctx.act.answer(request.request_id, { payload });
  };
  return h(
    "form",
    { class: "answer", onsubmit: submit },
    h("label", { for: id }, wantsText ? "Your answer" : "Your answer (JSON)"),
    field,
    h("button", { type: "submit", disabled: waiting }, "Send answer"),
  );
}

function workerShell(worker) {
  const titleId = `worker-${worker.worker_run_id}`;
  return h(
    "li",
    {
      class: "item card worker",
      "aria-labelledby": titleId,
      dataset: { kind: "worker", workerRunId: worker.worker_run_id },
    },
    h(
      "div",
      { class: "card-head" },
      h("span", { class: "kind" }, "sub-agent"),
      h("span", { class: "title", id: titleId }, worker.name),
      h("span", { class: "badge" }),
    ),
    h("p", { class: "task" }, worker.task),
    h("div", { class: "worker-plan" }),
    h("ol", { class: "timeline nested", "aria-label": `${worker.name}'s steps` }),
    h("div", { class: "worker-foot" }),
  );
}

function updateWorker(node, worker, ctx) {
  const badge = node.querySelector(".card-head .badge");
  badge.className = `badge status-${worker.status}`;
  badge.textContent = worker.status;
  node.dataset.status = worker.status;
  const plan = node.querySelector(".worker-plan");
  const planSig = JSON.stringify(worker.plan);
  if (plan.dataset.sig !== planSig) {
    plan.dataset.sig = planSig;
    const entries = worker.plan.length ? [h("h4", null, "Plan"), planList(worker.plan)] : [];
    plan.replaceChildren(...entries);
  }
  reconcile(node.querySelector(".timeline"), timelineEntries(worker.timeline, ctx));
  const usage = sumUsage([worker.usage]);
  node.querySelector(".worker-foot").replaceChildren(
    worker.summary
      ? h("p", { class: "summary" }, h("strong", null, "Summary: "), worker.summary)
      : "",
    h(
      "p",
      { class: "usage-line" },
      `Usage: ${count(usage.input_tokens)} in · ${count(usage.output_tokens)} out · `,
      `${count(usage.cache_read_input_tokens)} cache read · `,
      `${count(usage.cache_creation_input_tokens)} cache creation · `,
      `${count(usage.reasoning_output_tokens)} reasoning`,
    ),
  );
}

export function planList(entries) {
  return h(
    "ol",
    { class: "plan" },
    entries.map((entry) =>
      h(
        "li",
        { class: `plan-entry ${entry.status}`, dataset: { status: entry.status } },
        h("span", { class: "mark", "aria-hidden": "true" }, PLAN_MARK[entry.status] ?? "○"),
        srOnly(`${entry.status.replace("_", " ")}: `),
        entry.content,
        entry.priority === "high" ? h("span", { class: "priority" }, "high") : null,
      ),
    ),
  );
}

function artifactCard(artifact, ctx) {
  return h(
    "li",
    {
      class: "item card artifact",
      dataset: { kind: "artifact", artifactId: artifact.artifact_id },
    },
    h(
      "div",
      { class: "card-head" },
      h("span", { class: "kind" }, "artifact"),
      h("span", { class: "title" }, artifact.name),
    ),
    h(
      "p",
      { class: "meta" },
      `${artifact.media_type} · ${bytes(artifact.size)} · sha256 `,
      h("code", { title: artifact.sha256 }, artifact.sha256.slice(0, 12)),
    ),
    downloadLink(artifact, ctx),
  );
}

/** A published artifact's download; the upload's state otherwise (not the turn's). */
export function downloadLink(artifact, ctx) {
  const state = artifact.state ?? "published";
  if (state !== "published") {
    const why = artifact.error ? `: ${artifact.error.message}` : "";
    const retry = (event) => {
      event.target.disabled = true;
      ctx.urls.retryArtifact(artifact.artifact_id).catch(() => {
        event.target.disabled = false;
      });
    };
    return h(
      "span",
      { class: `artifact-state state-${state}`, dataset: { state } },
      `${artifact.name}: upload ${state}${why} `,
      state === "failed" && ctx.urls.retryArtifact
        ? h("button", { type: "button", class: "retry-upload", onclick: retry }, "Retry upload")
        : null,
    );
  }
  // The href is the plain (cookie-authorized) route; a click trades it for a single-use
  // link first, so what the browser fetches opens once, for this principal, briefly.
  const open = (event) => {
    if (!ctx.urls.link) return;
    event.preventDefault();
    ctx.urls.link(artifact.artifact_id).then((url) => {
      const a = h("a", { href: url, download: artifact.name, hidden: true });
      document.body.append(a);
      a.click();
      a.remove();
    });
  };
  return h(
    "a",
    {
      class: "download",
      href: ctx.urls.artifact(artifact.artifact_id),
      download: artifact.name,
      dataset: { sha256: artifact.sha256 },
      onclick: open,
    },
    `Download ${artifact.name}`,
  );
}

/** A resumed attempt's restored workspace; what it could not bring back is a warning. */
function restoreCard(restore) {
  const lost = [...restore.lost_paths];
  if (restore.lost_more) lost.push(`… ${restore.lost_more} more`);
  const warn = lost.length > 0 || restore.lost_tool_call_ids.length > 0;
  const where = restore.manifest ? `manifest ${restore.manifest.slice(0, 12)}` : "no commit yet";
  return h(
    "li",
    { class: `item restore${warn ? " warn" : ""}`, dataset: { kind: "workspace_restore" } },
    h("div", null, `Attempt ${restore.attempt}: workspace restored (${restore.files} files, ${where})`),
    lost.length ? h("div", { class: "lost" }, `Lost uncommitted changes: ${lost.join(", ")}`) : null,
    restore.lost_tool_call_ids.length
      ? h(
          "div",
          { class: "lost" },
          `Changes made by ${restore.lost_tool_call_ids.join(", ")} after the last commit are lost`,
        )
      : null,
  );
}

/** An MCP server the turn went on without, and why (its last stderr lines, or the gateway's reason). */
function unavailableCard(found) {
  return h(
    "li",
    { class: "item restore warn", dataset: { kind: "mcp_unavailable" } },
    h("div", null, `MCP server ${found.server} is unavailable (${found.code}); the turn goes on without its tools`),
    h("pre", { class: "lost" }, found.message),
  );
}

/** A file change: its diff (the same live and from history), or what a binary file is. */
function fileCard(change, ctx) {
  const facts = [];
  if (change.size !== null && change.size !== undefined) facts.push(bytes(change.size));
  if (change.binary) facts.push(`binary · sha256 ${(change.sha256 ?? "").slice(0, 12)}`);
  let body = null;
  if (change.diff) {
    const lines = change.diff.split("\n");
    if (lines.at(-1) === "") lines.pop();
    body = details(
      `diff:${change.id}`,
      lines.length <= 40,
      `diff (${lines.length} lines)`,
      h(
        "pre",
        { class: "diff" },
        lines.map((line) => h("span", { class: diffClass(line) }, `${line}\n`)),
      ),
    );
  } else if (change.diff_ref && ctx.urls.fileDiff) {
    body = h(
      "a",
      { class: "diff-ref", href: ctx.urls.fileDiff(change.id), target: "_blank", rel: "noopener" },
      "Full diff",
    );
  }
  return h(
    "li",
    { class: "item file", dataset: { kind: "file_change", change: change.change } },
    h("span", { class: `change change-${change.change}` }, change.change),
    " ",
    h("code", null, change.path),
    facts.length ? h("span", { class: "meta" }, ` · ${facts.join(" · ")}`) : null,
    body,
  );
}

function diffClass(line) {
  if (line.startsWith("+++") || line.startsWith("---")) return "diff-file";
  if (line.startsWith("@@")) return "diff-hunk";
  if (line.startsWith("+")) return "diff-add";
  if (line.startsWith("-")) return "diff-del";
  return "diff-ctx";
}
