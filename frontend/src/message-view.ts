// The DOM of one chat message: `.message` with data-role / data-seq / data-status, its text in
// `.message-text` (Markdown for the assistant, plain text otherwise), its tags and stats, and its
// buttons (.regenerate, .edit; in edit mode textarea.edit-input with .edit-save / .edit-cancel).
// Also the streaming bubble and the inline error of a failed reply. A turn with tools shows its
// calls as cards above its text (`.tool-call`, data-tool / data-status, the exact arguments and
// the result's preview in an expandable part), and a write waiting for the user as an approval
// card (`.approval-card`: the action and the exact arguments; Allow, Allow for this
// conversation, Deny — Enter allows, Escape denies). A message with pictures shows them as
// thumbnails above its text (`.message-pictures`, `img.message-picture` with data-sha256; the
// picture itself is set as `src` once read, see pictures.ts).
import { el } from "./dom";
import { formatMs, formatTokensPerSecond } from "./format";
import { renderMarkdown } from "./markdown";
import { storedCalls, type CallStatus, type ReplyFailure, type ShownCall, type StreamingReply } from "./chat-stream";
import type { AgentStop, MessageView, ReplyStats } from "./types";

const CALL_STATUS_TEXT: Record<CallStatus, string> = {
  running: "running…",
  waiting: "waiting for you",
  ok: "done",
  error: "failed",
  denied: "you declined",
};

const AGENT_STOP_NOTES: Partial<Record<AgentStop, string>> = {
  stepLimit: "Reached the most tool calls one message may make, so it answered with what it had.",
  noRoomForResults: "The context had no room for another tool result, so it answered with what it had.",
  contextFull: "Stopped: the context is full.",
};

/** The arguments as the tool got them, indented (an unusable call has none). */
export function argumentsText(args: unknown): string {
  if (args === null || args === undefined) return "";
  return JSON.stringify(args, null, 2);
}

export function callCard(call: ShownCall): HTMLElement {
  const name = call.tool || "unusable call";
  const card = el("div", {
    class: "tool-call",
    "data-tool": call.tool,
    "data-status": call.status,
    "data-step": call.step,
  });
  const details = el("details", { class: "tool-call-details" });
  details.append(
    el(
      "summary",
      null,
      el("span", { class: "tool-name", text: name }),
      el("span", { class: `tag call-status ${call.status}`, text: CALL_STATUS_TEXT[call.status] }),
      call.preview ? el("span", { class: "tool-preview", text: call.preview }) : null,
    ),
  );
  const args = argumentsText(call.arguments);
  if (args) details.append(el("pre", { class: "tool-arguments", text: args }));
  if (call.progress) details.append(el("p", { class: "tool-progress", text: call.progress }));
  if (call.truncated) details.append(el("p", { class: "tool-note", text: "The result was cut to fit." }));
  card.append(details);
  return card;
}

/** The write waiting for the user: what it would do and its exact arguments. */
export function approvalCard(call: ShownCall): HTMLElement {
  const card = el("div", {
    class: "approval-card",
    role: "alertdialog",
    "aria-label": `Allow ${call.tool}?`,
    "data-tool": call.tool,
    "data-step": call.step,
  });
  card.append(
    el("p", { class: "approval-action", text: `Companion wants to ${call.action ?? call.tool}.` }),
    el("pre", { class: "tool-arguments", text: argumentsText(call.arguments) }),
    el(
      "div",
      { class: "message-actions" },
      el("button", { type: "button", class: "approve primary", "data-answer": "yes", text: "Allow", title: "Enter" }),
      el("button", {
        type: "button",
        class: "approve-conversation",
        "data-answer": "conversation",
        text: "Allow for this conversation",
      }),
      el("button", { type: "button", class: "deny danger", "data-answer": "no", text: "Deny", title: "Escape" }),
    ),
  );
  return card;
}

function callsNode(calls: ShownCall[]): HTMLElement | null {
  if (!calls.length) return null;
  return el("div", { class: "tool-calls" }, ...calls.map(callCard));
}

export interface MessageOptions {
  regenerable: boolean;
  /** Editing this message: the draft text of the edit. */
  editText: string | null;
  /** A reply is streaming: editing and regenerating wait. */
  busy: boolean;
  /** Sanitized HTML of the assistant text (cached by the caller). */
  html: (message: MessageView) => string;
  /** A stored picture's data URL when it was read already (else the thumbnail waits for it). */
  pictureSrc?: (sha256: string) => string | null;
}

/** The thumbnails of a message's pictures, in order; null when it has none. */
export function picturesNode(message: MessageView, src: (sha256: string) => string | null = () => null): HTMLElement | null {
  const pictures = message.pictures ?? [];
  if (!pictures.length) return null;
  return el(
    "div",
    { class: "message-pictures" },
    ...pictures.map((p, i) =>
      el("img", {
        class: "message-picture",
        "data-sha256": p.sha256,
        src: src(p.sha256),
        alt: pictures.length > 1 ? `Picture ${i + 1} of ${pictures.length}` : "Picture",
      }),
    ),
  );
}

const STOP_NOTES: Partial<Record<ReplyStats["stopReason"], string>> = {
  max_tokens: "reached the reply length limit",
  context_full: "the context is full",
};

function statsText(stats: ReplyStats): string {
  const parts = [
    formatTokensPerSecond(stats.tokensPerSecond),
    `${formatMs(stats.timeToFirstTokenMs)} to first token`,
  ];
  const note = STOP_NOTES[stats.stopReason];
  if (note) parts.push(note);
  return parts.join(" · ");
}

export function messageNode(message: MessageView, options: MessageOptions): HTMLElement {
  const node = el("article", {
    class: `message ${message.role}`,
    "data-role": message.role,
    "data-seq": message.seq,
    "data-status": message.status,
    "data-id": message.id,
    "aria-label": message.role === "user" ? "You" : message.role === "assistant" ? "Assistant" : "System",
  });

  if (options.editText !== null) {
    const input = el("textarea", {
      class: "edit-input",
      rows: 3,
      "aria-label": "Edit your message",
    });
    input.value = options.editText;
    // the pictures stay with the edited message
    node.append(
      picturesNode(message, options.pictureSrc) ?? "",
      input,
      el(
        "div",
        { class: "message-actions" },
        el("button", { type: "button", class: "edit-save primary", text: "Save and resend" }),
        el("button", { type: "button", class: "edit-cancel", text: "Cancel" }),
      ),
    );
    node.classList.add("editing");
    return node;
  }

  const calls = message.role === "assistant" ? callsNode(storedCalls(message)) : null;
  if (calls) node.append(calls);
  const pictures = picturesNode(message, options.pictureSrc);
  if (pictures) node.append(pictures);
  const text = el("div", { class: "message-text" });
  if (message.role === "assistant") {
    text.classList.add("markdown");
    text.innerHTML = options.html(message);
  } else {
    text.textContent = message.text;
  }
  node.append(text);

  const meta = el("div", { class: "message-actions" });
  if (message.status === "stopped") meta.append(el("span", { class: "tag stopped", text: "stopped" }));
  if (message.status === "error") meta.append(el("span", { class: "tag error", text: "incomplete" }));
  if (message.role === "assistant" && message.stats) {
    // the exact figures too, for tools that read them (the streaming benchmark)
    meta.append(
      el("span", {
        class: "stats",
        text: statsText(message.stats),
        "data-tokens-per-second": message.stats.tokensPerSecond,
        "data-generated-tokens": message.stats.generatedTokens,
      }),
    );
  }
  if (message.role === "user") {
    meta.append(
      el("button", {
        type: "button",
        class: "edit",
        text: "Edit",
        disabled: options.busy,
        title: "Edit this message and get a new reply",
      }),
    );
  }
  if (options.regenerable) {
    meta.append(
      el("button", {
        type: "button",
        class: "regenerate",
        text: "Regenerate",
        disabled: options.busy,
        title: "Write this reply again",
      }),
    );
  }
  if (meta.childNodes.length) node.append(meta);
  return node;
}

export function streamingNode(reply: StreamingReply): HTMLElement {
  const node = el("article", {
    class: "message assistant streaming",
    "data-role": "assistant",
    "data-status": "streaming",
    "aria-label": "Assistant",
    "aria-busy": "true",
  });
  const waiting = reply.calls.find((c) => c.status === "waiting");
  const stopNote = reply.agentStop ? AGENT_STOP_NOTES[reply.agentStop] : undefined;
  node.append(
    el("p", { class: "summarizing-note", text: "Summarizing older turns…", hidden: !reply.summarizing }),
    callsNode(reply.calls) ?? "",
    waiting ? approvalCard(waiting) : "",
    el("div", { class: "message-text markdown" }),
    stopNote ? el("p", { class: "tool-note", text: stopNote }) : "",
    el("span", { class: "typing", "aria-hidden": "true" }),
  );
  paintStreaming(node, reply);
  return node;
}

/** Updates a streaming bubble in place with the reply's text so far. */
export function paintStreaming(node: HTMLElement, reply: StreamingReply): void {
  const note = node.querySelector<HTMLElement>(".summarizing-note");
  if (note) note.hidden = !reply.summarizing;
  const text = node.querySelector<HTMLElement>(".message-text");
  if (text) text.innerHTML = reply.text ? renderMarkdown(reply.text) : "";
}

export function failureNode(failure: ReplyFailure, canRetry: boolean): HTMLElement {
  const node = el("div", { class: "chat-error", role: "alert" });
  if (failure.partial) node.append(el("div", { class: "chat-error-partial", text: failure.partial }));
  node.append(el("p", { class: "chat-error-text", text: failure.message }));
  if (canRetry) node.append(el("button", { type: "button", class: "retry", text: "Try again" }));
  return node;
}

/** `modelNotice`: the loaded model's one sentence for the user (a base model says that it
 *  continues text rather than answering), shown before the first message. */
export function emptyChatNode(hasConversation: boolean, modelNotice: string | null = null): HTMLElement {
  return el(
    "div",
    { class: "chat-empty" },
    el("h2", { text: hasConversation ? "A new conversation" : "Ask anything" }),
    el("p", {
      text: "Replies are written on this device; nothing leaves it. Drop a document on the window to summarize it.",
    }),
    modelNotice ? el("p", { class: "model-notice", role: "note", text: modelNotice }) : null,
  );
}
