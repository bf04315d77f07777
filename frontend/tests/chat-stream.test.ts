import { describe, expect, it } from "vitest";
import {
  applyChatEvent,
  beginReply,
  chatWithMessages,
  regenerableSeq,
  type ChatState,
} from "../src/chat-stream";
import type { ChatEvent, MessageView, ThermalNotice } from "../src/types";

function msg(seq: number, role: MessageView["role"], text: string, status: MessageView["status"] = "complete"): MessageView {
  return { id: 100 + seq, seq, role, text, status, createdAt: seq, stats: null };
}

function run(state: ChatState, events: ChatEvent[]): ChatState {
  return events.reduce(applyChatEvent, state);
}

const history = [msg(1, "user", "hi"), msg(2, "assistant", "hello"), msg(3, "user", "more"), msg(4, "assistant", "sure")];

describe("applyChatEvent", () => {
  it("user drops every shown message with seq >= its seq, then shows it", () => {
    const state = run(chatWithMessages(history), [{ event: "user", data: { ...msg(3, "user", "edited"), id: 999 } }]);
    expect(state.messages.map((m) => [m.seq, m.text])).toEqual([
      [1, "hi"],
      [2, "hello"],
      [3, "edited"],
    ]);
    expect(state.streaming).toMatchObject({ text: "", summarizing: false, calls: [] });
  });

  it("appends text pieces, and summarizing shows until text comes", () => {
    let state = run(chatWithMessages([]), [
      { event: "user", data: msg(1, "user", "hi") },
      { event: "summarizing", data: null },
    ]);
    expect(state.streaming?.summarizing).toBe(true);
    state = run(state, [
      { event: "text", data: "Hel" },
      { event: "text", data: "lo, " },
      { event: "text", data: "世界" },
    ]);
    expect(state.streaming).toMatchObject({ text: "Hello, 世界", summarizing: false });
  });

  it("done replaces the streaming reply with the final message", () => {
    const final = msg(2, "assistant", "Hello!", "stopped");
    const state = run(chatWithMessages([]), [
      { event: "user", data: msg(1, "user", "hi") },
      { event: "text", data: "Hel" },
      { event: "done", data: final },
    ]);
    expect(state.streaming).toBeNull();
    expect(state.messages).toEqual([msg(1, "user", "hi"), final]);
    // A second done with the same message (the command's result) changes nothing.
    expect(applyChatEvent(state, { event: "done", data: final }).messages).toEqual(state.messages);
  });

  it("error ends the stream with an inline failure that keeps the partial text", () => {
    const state = run(chatWithMessages([]), [
      { event: "user", data: msg(1, "user", "hi") },
      { event: "text", data: "partial" },
      { event: "error", data: { code: "engine", message: "The engine stopped." } },
    ]);
    expect(state.streaming).toBeNull();
    expect(state.failure).toEqual({ message: "The engine stopped. (code: engine)", partial: "partial", canRetry: true });
    expect(run(state, [{ event: "user", data: msg(1, "user", "again") }]).failure).toBeNull();
  });

  it("keeps the last thermal notice", () => {
    const notice: ThermalNotice = {
      state: "serious",
      previous: "fair",
      ratePercent: 40,
      fewerThreads: true,
      backgroundPaused: true,
      message: "The device is hot.",
    };
    expect(applyChatEvent(chatWithMessages([]), { event: "thermal", data: notice }).thermal).toBe(notice);
  });
});

describe("regenerableSeq", () => {
  it("is the last message when it is the assistant's and nothing streams", () => {
    const state = chatWithMessages(history);
    expect(regenerableSeq(state)).toBe(4);
    expect(regenerableSeq(beginReply(state))).toBeNull();
    expect(regenerableSeq(chatWithMessages(history.slice(0, 3)))).toBeNull();
  });

  it("sorts messages by seq", () => {
    expect(chatWithMessages([history[2], history[0]]).messages.map((m) => m.seq)).toEqual([1, 3]);
  });
});
