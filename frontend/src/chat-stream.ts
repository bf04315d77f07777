// What the chat shows, as data, and how each streamed ChatEvent changes it: a pure reducer the
// chat view renders from (testable without Tauri or a DOM).
import { withCode } from "./format";
import type { AgentEvent, AgentStop, ChatEvent, MessageView, ThermalNotice, ToolTurnCall } from "./types";

/** How a tool call stands: running, waiting for the user's approval, done, failed, or
 *  declined by the user. */
export type CallStatus = "running" | "waiting" | "ok" | "error" | "denied";

export interface ShownCall extends ToolTurnCall {
  status: CallStatus;
  /** What the write would do, while it waits for approval. */
  action: string | null;
  /** The tool's last progress line (summarize_file's chunks). */
  progress: string | null;
}

export interface StreamingReply {
  /** The reply's text so far. */
  text: string;
  /** The engine is summarizing older turns before it answers. */
  summarizing: boolean;
  /** The tool calls of a turn with tools so far. */
  calls: ShownCall[];
  /** Why the agent loop ended, once it did. */
  agentStop: AgentStop | null;
}

function newReply(text = "", summarizing = false): StreamingReply {
  return { text, summarizing, calls: [], agentStop: null };
}

/** The status a finished call shows. */
export function finishedStatus(call: Pick<ToolTurnCall, "ok" | "errorCode">): CallStatus {
  if (call.ok) return "ok";
  return call.errorCode === "denied" ? "denied" : "error";
}

/** The calls a stored reply carries, as the cards show them. */
export function storedCalls(message: MessageView): ShownCall[] {
  return (message.toolCalls ?? []).map((c) => ({ ...c, status: finishedStatus(c), action: null, progress: null }));
}

/** The call waiting for the user's approval, if one is. */
export function waitingCall(reply: StreamingReply | null): ShownCall | null {
  return reply?.calls.find((c) => c.status === "waiting") ?? null;
}

function withCall(reply: StreamingReply, step: number, change: (c: ShownCall) => ShownCall): StreamingReply {
  return { ...reply, calls: reply.calls.map((c) => (c.step === step ? change(c) : c)) };
}

export function applyAgentEvent(reply: StreamingReply, event: AgentEvent): StreamingReply {
  switch (event.event) {
    case "callStarted": {
      const { step, tool, arguments: args } = event.data;
      const call: ShownCall = {
        step,
        tool,
        arguments: args,
        ok: false,
        errorCode: null,
        preview: "",
        truncated: false,
        status: "running",
        action: null,
        progress: null,
      };
      return { ...reply, calls: [...reply.calls.filter((c) => c.step !== step), call] };
    }
    case "waitingForApproval":
      return withCall(reply, event.data.step, (c) => ({ ...c, status: "waiting", action: event.data.action }));
    case "progress": {
      const running = reply.calls.filter((c) => c.status === "running").pop();
      return running ? withCall(reply, running.step, (c) => ({ ...c, progress: event.data.message })) : reply;
    }
    case "callFinished": {
      const d = event.data;
      return withCall(reply, d.step, (c) => ({
        ...c,
        ok: d.ok,
        errorCode: d.errorCode,
        preview: d.preview,
        truncated: d.truncated,
        status: finishedStatus(d),
        action: null,
        progress: null,
      }));
    }
    case "invalidCall": {
      const d = event.data;
      const call: ShownCall = {
        step: d.step,
        tool: "",
        arguments: null,
        ok: false,
        errorCode: "invalid_call",
        preview: d.problem,
        truncated: false,
        status: "error",
        action: null,
        progress: null,
      };
      return { ...reply, calls: [...reply.calls, call] };
    }
    case "done":
      return { ...reply, agentStop: event.data.stop };
  }
}

export interface ReplyFailure {
  message: string;
  /** Text streamed before the failure, if any. */
  partial: string;
  /** A user message was committed, so `regenerate` can try the reply again. */
  canRetry: boolean;
}

export interface ChatState {
  /** Committed messages, ordered by seq. */
  messages: MessageView[];
  streaming: StreamingReply | null;
  failure: ReplyFailure | null;
  thermal: ThermalNotice | null;
}

export const emptyChat: ChatState = { messages: [], streaming: null, failure: null, thermal: null };

function bySeq(a: MessageView, b: MessageView): number {
  return a.seq - b.seq;
}

export function chatWithMessages(messages: readonly MessageView[]): ChatState {
  return { ...emptyChat, messages: [...messages].sort(bySeq) };
}

/** A reply is starting (before any event arrived): clear the last failure. */
export function beginReply(state: ChatState): ChatState {
  return { ...state, failure: null, streaming: newReply() };
}

export function applyChatEvent(state: ChatState, event: ChatEvent): ChatState {
  switch (event.event) {
    case "user": {
      const user = event.data;
      const kept = state.messages.filter((m) => m.seq < user.seq && m.id !== user.id);
      return {
        ...state,
        messages: [...kept, user].sort(bySeq),
        streaming: newReply(),
        failure: null,
      };
    }
    case "summarizing":
      return { ...state, streaming: { ...(state.streaming ?? newReply()), summarizing: true } };
    case "text": {
      const reply = state.streaming ?? newReply();
      return { ...state, streaming: { ...reply, text: reply.text + event.data, summarizing: false } };
    }
    case "tool":
      return { ...state, streaming: applyAgentEvent(state.streaming ?? newReply(), event.data) };
    case "thermal":
      return { ...state, thermal: event.data };
    case "done": {
      const reply = event.data;
      const kept = state.messages.filter((m) => m.seq !== reply.seq && m.id !== reply.id);
      return { ...state, messages: [...kept, reply].sort(bySeq), streaming: null, failure: null };
    }
    case "error": {
      const last = state.messages[state.messages.length - 1];
      return {
        ...state,
        streaming: null,
        failure: {
          message: withCode(event.data.message, event.data.code),
          partial: state.streaming?.text ?? "",
          canRetry: last?.role === "user",
        },
      };
    }
  }
}

/** The seq of the assistant message that carries the Regenerate button: the last message, when
 *  it is an assistant's and no reply is streaming; else null. */
export function regenerableSeq(state: ChatState): number | null {
  if (state.streaming) return null;
  const last = state.messages[state.messages.length - 1];
  return last && last.role === "assistant" ? last.seq : null;
}
