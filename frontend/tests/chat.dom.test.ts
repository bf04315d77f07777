// The chat view against a fake backend: sending with nothing open, streaming into the DOM
// contract's selectors, stop, regenerate, edit, errors and the debounced draft.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { fakeBackend, loadPage, press, settle, typeInto, type FakeBackend } from "./page";
import type { FakeChannel } from "./tauri-mock";

vi.mock("@tauri-apps/api/core", async () => {
  const { FakeChannel } = await import("./tauri-mock");
  return { invoke: vi.fn(), Channel: FakeChannel };
});

import { invoke } from "@tauri-apps/api/core";
import { initBanners } from "../src/banner";
import { createChat, OTHER_MODEL_NOTICE, type ChatHooks, type ChatView } from "../src/chat";
import type { ChatEvent, ConversationItem, MessageView, OpenedConversation } from "../src/types";

const invokeMock = vi.mocked(invoke) as unknown as ReturnType<typeof vi.fn>;

function conversation(id = "c1"): ConversationItem {
  return { id, title: "New conversation", pinned: false, createdAt: 1, updatedAt: 1, messageCount: 0, preview: null, tools: false };
}

function msg(seq: number, role: MessageView["role"], text: string, status: MessageView["status"] = "complete"): MessageView {
  return { id: 100 + seq, seq, role, text, status, createdAt: seq, stats: null };
}

function opened(messages: MessageView[] = [], id = "c1"): OpenedConversation {
  return { conversation: conversation(id), messages, resume: { kind: "empty" } };
}

/** A streaming command the test drives: its channel, and how to finish it. */
interface Pending {
  channel: FakeChannel<ChatEvent>;
  args: Record<string, unknown>;
  resolve(reply: MessageView): void;
  reject(error: unknown): void;
}

function streaming(list: Pending[]) {
  return (args: Record<string, unknown>) =>
    new Promise<MessageView>((resolve, reject) => {
      list.push({ channel: args.onEvent as FakeChannel<ChatEvent>, args, resolve, reject });
    });
}

const $ = <T extends Element = HTMLElement>(s: string) => document.querySelector<T>(s)!;
const $$ = (s: string) => Array.from(document.querySelectorAll<HTMLElement>(s));

describe("chat", () => {
  let backend: FakeBackend;
  let pending: Pending[];
  let hooks: ChatHooks;
  let chat: ChatView;

  beforeEach(() => {
    loadPage();
    initBanners();
    pending = [];
    backend = fakeBackend(invokeMock, {
      create_conversation: () => opened(),
      open_conversation: ({ id }) =>
        opened([msg(1, "user", "first"), msg(2, "assistant", "one"), msg(3, "user", "second"), msg(4, "assistant", "two")], id),
      send_message: streaming(pending) as never,
      regenerate: streaming(pending) as never,
      edit_message: streaming(pending) as never,
      stop_reply: () => null,
      set_draft: () => null,
    });
    hooks = { onConversation: vi.fn(), onUserMessage: vi.fn(), onReplyFinished: vi.fn(), onThermal: vi.fn() };
    chat = createChat(hooks);
  });

  afterEach(() => {
    vi.useRealTimers();
  });

  it("sends with no conversation open, streams, and ends with the final message", async () => {
    const composer = $<HTMLTextAreaElement>("#composer");
    expect($("#stop").hidden).toBe(true);
    typeInto(composer, "Hello there");
    press(composer, "Enter");
    await settle();

    expect(backend.callsOf("create_conversation")).toHaveLength(1);
    expect(pending).toHaveLength(1);
    expect(pending[0].args.text).toBe("Hello there");
    expect(composer.value).toBe("");
    expect($("#stop").hidden).toBe(false);
    expect($("#send").hidden).toBe(true);

    const ch = pending[0].channel;
    ch.onmessage({ event: "user", data: msg(1, "user", "Hello there") });
    const user = $('.message[data-role="user"]');
    expect(user.dataset.seq).toBe("1");
    expect(user.querySelector(".message-text")?.textContent).toBe("Hello there");
    // the saved message reaches the conversation list while the reply streams
    expect(hooks.onUserMessage).toHaveBeenCalledTimes(1);
    expect(hooks.onReplyFinished).not.toHaveBeenCalled();

    ch.onmessage({ event: "summarizing", data: null });
    expect($(".summarizing-note").hidden).toBe(false);
    ch.onmessage({ event: "text", data: "Hi, " });
    ch.onmessage({ event: "text", data: "**friend**" });
    await settle(120);
    const bubble = $('.message[data-status="streaming"]');
    expect(bubble.dataset.role).toBe("assistant");
    expect(bubble.querySelector(".message-text strong")?.textContent).toBe("friend");
    expect(bubble.querySelector(".message-text")?.textContent).toBe("Hi, friend");

    // A second Enter while streaming does not send.
    typeInto(composer, "next");
    press(composer, "Enter");
    await settle();
    expect(pending).toHaveLength(1);

    const final = { ...msg(2, "assistant", "Hi, **friend**"), stats: null };
    ch.onmessage({ event: "done", data: final });
    pending[0].resolve(final);
    await settle();
    expect($$('.message[data-status="streaming"]')).toHaveLength(0);
    const reply = $('.message[data-role="assistant"]');
    expect(reply.dataset.seq).toBe("2");
    expect(reply.dataset.status).toBe("complete");
    expect(reply.querySelector(".regenerate")).not.toBeNull();
    expect($("#stop").hidden).toBe(true);
    expect($("#send").hidden).toBe(false);
    expect(hooks.onReplyFinished).toHaveBeenCalledTimes(1);
    expect(hooks.onReplyFinished).toHaveBeenCalledWith(final);
  });

  it("stop calls stop_reply and a stopped reply is tagged", async () => {
    await chat.open("c1");
    typeInto($<HTMLTextAreaElement>("#composer"), "go");
    void chat.send();
    await settle();
    const ch = pending[0].channel;
    ch.onmessage({ event: "user", data: msg(5, "user", "go") });
    ch.onmessage({ event: "text", data: "partial" });
    $("#stop").click();
    await settle();
    expect(backend.callsOf("stop_reply")).toHaveLength(1);
    ch.onmessage({ event: "done", data: msg(6, "assistant", "partial", "stopped") });
    const reply = $('.message[data-seq="6"]');
    expect(reply.dataset.status).toBe("stopped");
    expect(reply.querySelector(".tag.stopped")?.textContent).toBe("stopped");
  });

  it("regenerate replaces the last reply; edit truncates after the edited message", async () => {
    await chat.open("c1");
    expect($$(".message")).toHaveLength(4);
    expect($$(".regenerate")).toHaveLength(1);
    expect($('.message[data-seq="4"] .regenerate')).not.toBeNull();
    expect($$(".edit")).toHaveLength(2);

    $(".regenerate").click();
    await settle();
    expect(backend.callsOf("regenerate")).toHaveLength(1);
    pending[0].channel.onmessage({ event: "user", data: msg(3, "user", "second") });
    expect($$(".message").map((m) => m.dataset.seq)).toEqual(["1", "2", "3", undefined]);
    pending[0].channel.onmessage({ event: "done", data: msg(4, "assistant", "two again") });
    expect($('.message[data-seq="4"] .message-text').textContent).toBe("two again");

    $('.message[data-seq="1"] .edit').click();
    const input = $<HTMLTextAreaElement>("textarea.edit-input");
    expect(input.value).toBe("first");
    typeInto(input, "first, edited");
    $(".edit-save").click();
    await settle();
    const [edit] = backend.callsOf("edit_message");
    expect(edit.messageId).toBe(101);
    expect(edit.text).toBe("first, edited");
    pending[1].channel.onmessage({ event: "user", data: { ...msg(1, "user", "first, edited"), id: 200 } });
    expect($$(".message").map((m) => m.dataset.seq)).toEqual(["1", undefined]);
    expect($('.message[data-seq="1"] .message-text').textContent).toBe("first, edited");
  });

  it("shows a stream error inline and a failed send puts the text back", async () => {
    await chat.open("c1");
    typeInto($<HTMLTextAreaElement>("#composer"), "boom");
    void chat.send();
    await settle();
    pending[0].channel.onmessage({ event: "user", data: msg(5, "user", "boom") });
    pending[0].channel.onmessage({ event: "error", data: { code: "engine", message: "The engine stopped; try again." } });
    pending[0].reject({ code: "engine", message: "The engine stopped; try again." });
    await settle();
    expect($(".chat-error").textContent).toContain("The engine stopped; try again.");
    expect($(".chat-error .retry")).not.toBeNull();
    expect($("#stop").hidden).toBe(true);

    typeInto($<HTMLTextAreaElement>("#composer"), "again");
    const sent = chat.send();
    await settle();
    pending[1].reject({ code: "no_model", message: "no model is loaded" });
    await sent;
    expect($(".chat-error-text").textContent).toBe("No model is loaded. (code: no_model)");
    expect($<HTMLTextAreaElement>("#composer").value).toBe("again");
  });

  it("ignores a reply's late events once another conversation is open", async () => {
    await chat.open("c1");
    typeInto($<HTMLTextAreaElement>("#composer"), "go");
    void chat.send();
    await settle();
    const ch = pending[0].channel;
    await chat.open("c2");
    expect(chat.currentId()).toBe("c2");
    expect($("#stop").hidden).toBe(true);
    ch.onmessage({ event: "user", data: msg(9, "user", "go") });
    ch.onmessage({ event: "text", data: "late" });
    expect($$('.message[data-seq="9"]')).toHaveLength(0);
    expect($$('.message[data-status="streaming"]')).toHaveLength(0);
  });

  it("sends the draft 150 ms after the last keystroke, never when empty", () => {
    vi.useFakeTimers();
    const composer = $<HTMLTextAreaElement>("#composer");
    typeInto(composer, "H");
    vi.advanceTimersByTime(100);
    typeInto(composer, "He");
    vi.advanceTimersByTime(100);
    typeInto(composer, "Hel");
    vi.advanceTimersByTime(149);
    expect(backend.callsOf("set_draft")).toHaveLength(0);
    vi.advanceTimersByTime(1);
    expect(backend.callsOf("set_draft")).toEqual([{ text: "Hel" }]);
    typeInto(composer, "   ");
    vi.advanceTimersByTime(500);
    expect(backend.callsOf("set_draft")).toHaveLength(1);
  });

  it("Shift+Enter does not send", async () => {
    const composer = $<HTMLTextAreaElement>("#composer");
    typeInto(composer, "line one");
    const event = press(composer, "Enter", { shiftKey: true });
    await settle();
    expect(event.defaultPrevented).toBe(false);
    expect(backend.callsOf("create_conversation")).toHaveLength(0);
  });

  it("highlights a message by seq", async () => {
    await chat.open("c1");
    expect(chat.highlight(3)).toBe(true);
    expect($('.message[data-seq="3"]').classList.contains("highlight")).toBe(true);
    expect(chat.highlight(42)).toBe(false);
  });

  it("a new conversation on a base model says what the model does, and only there", async () => {
    const notice = "This is a base model: it continues the text it is given.";
    chat.setModelNotice(notice);
    await chat.newConversation();
    expect($(".chat-empty .model-notice").textContent).toBe(notice);
    chat.setModelNotice(null);
    expect($(".chat-empty")).not.toBeNull();
    expect(document.querySelector(".chat-empty .model-notice")).toBeNull();
    chat.setModelNotice(notice);
    await chat.open("other");
    expect(document.querySelector(".chat-empty")).toBeNull();
    expect(document.querySelector(".model-notice")).toBeNull();
  });

  it("a conversation held with another model says so until a reply is made on this one", async () => {
    backend = fakeBackend(invokeMock, {
      open_conversation: ({ id }) => ({
        ...opened([msg(1, "user", "first"), msg(2, "assistant", "one")], id),
        resume: id === "moved" ? { kind: "otherModel", tokens: 40 } : { kind: "snapshot", tokens: 40 },
      }),
      send_message: streaming(pending) as never,
      set_draft: () => null,
    });
    await chat.open("moved");
    expect($(".other-model").textContent).toBe(OTHER_MODEL_NOTICE);
    typeInto($<HTMLTextAreaElement>("#composer"), "And now?");
    const sent = chat.send();
    await settle();
    pending[0].resolve(msg(4, "assistant", "a reply from this model"));
    await sent;
    expect(document.querySelector(".other-model")).toBeNull();
    await chat.open("moved", true);
    expect(document.querySelector(".other-model")).not.toBeNull();
    await chat.open("stayed");
    expect(document.querySelector(".other-model")).toBeNull();
  });
  it("shows a turn's tool calls as cards and answers a write from its approval card", async () => {
    backend = fakeBackend(invokeMock, {
      create_conversation: () => opened(),
      send_message: streaming(pending) as never,
      set_conversation_tools: () => null,
      answer_approval: () => true,
      set_draft: () => null,
    });
    const toolsSwitch = $<HTMLInputElement>("#tools-switch");
    expect(toolsSwitch.checked).toBe(false);
    toolsSwitch.checked = true;
    toolsSwitch.dispatchEvent(new Event("change"));
    const composer = $<HTMLTextAreaElement>("#composer");
    typeInto(composer, "which file talks about tomatoes?");
    press(composer, "Enter");
    await settle();
    expect(pending[0].args.tools).toBe(true);

    const ch = pending[0].channel;
    ch.onmessage({ event: "user", data: msg(1, "user", "which file talks about tomatoes?") });
    ch.onmessage({ event: "tool", data: { event: "callStarted", data: { step: 1, tool: "search_files", arguments: { query: "tomatoes" } } } });
    let card = $('.tool-call[data-step="1"]');
    expect(card.dataset.tool).toBe("search_files");
    expect(card.dataset.status).toBe("running");
    expect(card.querySelector(".tool-arguments")?.textContent).toContain('"query": "tomatoes"');
    ch.onmessage({
      event: "tool",
      data: {
        event: "callFinished",
        data: { step: 1, tool: "search_files", ok: true, errorCode: null, preview: "tomatoes.txt:1: …", truncated: false },
      },
    });
    card = $('.tool-call[data-step="1"]');
    expect(card.dataset.status).toBe("ok");
    expect(card.querySelector(".tool-preview")?.textContent).toBe("tomatoes.txt:1: …");

    // a write waits: the approval card shows the exact arguments and takes the focus
    const args = { title: "Tomatoes", text: "water them" };
    ch.onmessage({ event: "tool", data: { event: "callStarted", data: { step: 2, tool: "add_note", arguments: args } } });
    ch.onmessage({
      event: "tool",
      data: { event: "waitingForApproval", data: { step: 2, tool: "add_note", arguments: args, action: "add the note “Tomatoes”" } },
    });
    const approval = $(".approval-card");
    expect(approval.querySelector(".approval-action")?.textContent).toContain("add the note");
    expect(JSON.parse(approval.querySelector(".tool-arguments")?.textContent ?? "")).toEqual(args);
    expect(document.activeElement).toBe(approval.querySelector(".approve"));
    expect($('.tool-call[data-step="2"]').dataset.status).toBe("waiting");
    // Escape denies (and does not stop the reply)
    press(approval.querySelector(".approve") as HTMLElement, "Escape");
    await settle();
    expect(backend.callsOf("answer_approval")).toEqual([{ answer: "no" }]);
    expect(backend.callsOf("stop_reply")).toHaveLength(0);
    ch.onmessage({
      event: "tool",
      data: {
        event: "callFinished",
        data: { step: 2, tool: "add_note", ok: false, errorCode: "denied", preview: "The user declined add_note.", truncated: false },
      },
    });
    expect($$(".approval-card")).toHaveLength(0);
    expect($('.tool-call[data-step="2"]').dataset.status).toBe("denied");
    ch.onmessage({ event: "text", data: "It is tomatoes.txt." });
    ch.onmessage({ event: "tool", data: { event: "done", data: { stop: "answered", steps: 2 } } });

    // the stored reply keeps its calls: the cards stay after the turn
    const reply: MessageView = {
      ...msg(2, "assistant", "It is tomatoes.txt."),
      toolCalls: [
        { step: 1, tool: "search_files", arguments: { query: "tomatoes" }, ok: true, errorCode: null, preview: "tomatoes.txt:1: …", truncated: false },
        { step: 2, tool: "add_note", arguments: args, ok: false, errorCode: "denied", preview: "The user declined add_note.", truncated: false },
      ],
    };
    ch.onmessage({ event: "done", data: reply });
    const stored = $('.message[data-seq="2"]');
    expect(Array.from(stored.querySelectorAll<HTMLElement>(".tool-call")).map((c) => c.dataset.status)).toEqual([
      "ok",
      "denied",
    ]);
  });
});
