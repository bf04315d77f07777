// What the chat shows, as data, and how each streamed ChatEvent changes it: a pure reducer the
// chat view renders from (testable without Tauri or a DOM).
import { withCode } from "./format";
import type { ChatEvent, MessageView, ThermalNotice } from "./types";

export interface StreamingReply {
  /** The reply's text so far. */
  text: string;
  /** The engine is summarizing older turns before it answers. */
  summarizing: boolean;
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
  return { ...state, failure: null, streaming: { text: "", summarizing: false } };
}

export function applyChatEvent(state: ChatState, event: ChatEvent): ChatState {
  switch (event.event) {
    case "user": {
      const user = event.data;
      const kept = state.messages.filter((m) => m.seq < user.seq && m.id !== user.id);
      return {
        ...state,
        messages: [...kept, user].sort(bySeq),
        streaming: { text: "", summarizing: false },
        failure: null,
      };
    }
    case "summarizing":
      return { ...state, streaming: { text: state.streaming?.text ?? "", summarizing: true } };
    case "text":
      return {
        ...state,
        streaming: { text: (state.streaming?.text ?? "") + event.data, summarizing: false },
      };
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
