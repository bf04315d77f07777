// Pictures in the chat against a fake backend: pasted, dropped or attached pictures wait as
// thumbnails above the composer (removable), go with the message and are cleared after it (kept
// when the send is refused), are refused with a notice while the model reads no pictures, and a
// stored message shows its pictures as thumbnails read through the `picture` command.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { fakeBackend, loadPage, press, settle, typeInto, type FakeBackend } from "./page";
import type { FakeChannel } from "./tauri-mock";

vi.mock("@tauri-apps/api/core", async () => {
  const { FakeChannel } = await import("./tauri-mock");
  return { invoke: vi.fn(), Channel: FakeChannel };
});

import { invoke } from "@tauri-apps/api/core";
import { initBanners } from "../src/banner";
import { ATTACH_TITLE, createChat, type ChatView } from "../src/chat";
import { messageNode } from "../src/message-view";
import { clearPictureCache, isPicturePath, NO_PROJECTOR_NOTICE } from "../src/pictures";
import type { ChatEvent, MessageView, OpenedConversation } from "../src/types";

const invokeMock = vi.mocked(invoke) as unknown as ReturnType<typeof vi.fn>;
const $ = <T extends Element = HTMLElement>(s: string) => document.querySelector<T>(s)!;
const $$ = (s: string) => Array.from(document.querySelectorAll<HTMLElement>(s));

const CAT_SHA = "a".repeat(64);
const DOG_SHA = "b".repeat(64);

function msg(seq: number, role: MessageView["role"], text: string, extra: Partial<MessageView> = {}): MessageView {
  return { id: 100 + seq, seq, role, text, status: "complete", createdAt: seq, stats: null, ...extra };
}

function opened(messages: MessageView[] = []): OpenedConversation {
  return {
    conversation: { id: "c1", title: "Pets", pinned: false, createdAt: 1, updatedAt: 1, messageCount: messages.length, preview: null, tools: false },
    messages,
    resume: { kind: "empty" },
  };
}

/** A PNG file as a paste or the file picker gives it (the bytes need not be a whole PNG here:
 *  the Rust side checks them). */
function png(name: string, bytes = [0x89, 0x50, 0x4e, 0x47]): File {
  return new File([new Uint8Array(bytes)], name, { type: "image/png" });
}

/** What a paste of `files` (and maybe text) into the composer looks like to the page. */
function paste(files: File[], text = ""): Event {
  const event = new Event("paste", { bubbles: true, cancelable: true });
  Object.defineProperty(event, "clipboardData", {
    value: { files, items: [], types: files.length ? ["Files"] : [], getData: (t: string) => (t === "text/plain" ? text : "") },
  });
  $("#composer").dispatchEvent(event);
  return event;
}

function drop(files: File[]): Event {
  const event = new Event("drop", { bubbles: true, cancelable: true });
  Object.defineProperty(event, "dataTransfer", { value: { files, items: [], types: ["Files"] } });
  $("#composer").dispatchEvent(event);
  return event;
}

/** Lets FileReader finish (it reads on a later turn of the event loop). */
async function read(): Promise<void> {
  await settle(20);
  await settle();
}

interface Pending {
  channel: FakeChannel<ChatEvent>;
  args: Record<string, unknown>;
  resolve(reply: MessageView): void;
  reject(error: unknown): void;
}

describe("pictures in the chat", () => {
  let backend: FakeBackend;
  let pending: Pending[];
  let chat: ChatView;

  beforeEach(() => {
    loadPage();
    initBanners();
    clearPictureCache();
    pending = [];
    backend = fakeBackend(invokeMock, {
      create_conversation: () => opened(),
      open_conversation: () =>
        opened([
          msg(0, "user", "Which one is the cat?", {
            pictures: [
              { sha256: CAT_SHA, mimeType: "image/png" },
              { sha256: DOG_SHA, mimeType: "image/jpeg" },
            ],
          }),
          msg(1, "assistant", "The first."),
        ]),
      send_message: ((args: Record<string, unknown>) =>
        new Promise<MessageView>((resolve, reject) => {
          pending.push({ channel: args.onEvent as FakeChannel<ChatEvent>, args, resolve, reject });
        })) as never,
      set_draft: () => null,
      picture: ({ sha256 }) => `data:image/png;base64,${sha256.slice(0, 8)}`,
    });
    chat = createChat({ onConversation: vi.fn(), onReplyFinished: vi.fn(), onThermal: vi.fn() });
  });

  afterEach(() => {
    vi.useRealTimers();
  });

  it("without a projector the attach button is disabled and says why, and a paste is refused with a notice", async () => {
    const attach = $<HTMLButtonElement>("#attach");
    expect(attach.disabled).toBe(true);
    expect(attach.title).toBe(NO_PROJECTOR_NOTICE);
    const event = paste([png("cat.png")]);
    await read();
    expect(event.defaultPrevented).toBe(true);
    expect($("#notices").textContent).toContain(NO_PROJECTOR_NOTICE);
    expect($("#pending-pictures").hidden).toBe(true);
    drop([png("dog.png")]);
    await read();
    expect($$("#notices .notice")).toHaveLength(1);
    expect($$(".pending-picture")).toHaveLength(0);

    chat.setReadsPictures(true);
    expect(attach.disabled).toBe(false);
    expect(attach.title).toBe(ATTACH_TITLE);
  });

  it("pasted, dropped and attached pictures wait as thumbnails and can be removed", async () => {
    chat.setReadsPictures(true);
    // the attach button opens the hidden file input, whose choice lands in the tray
    const input = $<HTMLInputElement>("#attach-input");
    expect(input.accept).toBe("image/png,image/jpeg,image/webp,image/gif");
    expect(input.multiple).toBe(true);
    const picker = vi.spyOn(input, "click").mockImplementation(() => undefined);
    $("#attach").click();
    expect(picker).toHaveBeenCalledTimes(1);
    Object.defineProperty(input, "files", { value: [png("one.png")], configurable: true });
    input.dispatchEvent(new Event("change"));
    await read();

    paste([png("two.png")]);
    drop([png("three.png")]);
    await read();
    const names = () => $$(".pending-picture img").map((i) => i.getAttribute("alt"));
    expect(names()).toEqual(["one.png", "two.png", "three.png"]);
    expect($("#pending-pictures").hidden).toBe(false);
    expect($(".pending-picture img").getAttribute("src")).toBe("data:image/png;base64,iVBORw==");

    $$(".remove-picture")[1].click();
    expect(names()).toEqual(["one.png", "three.png"]);

    // a file that is not a picture Companion reads is left out, and said
    paste([new File(["BM"], "old.bmp", { type: "image/bmp" })]);
    await read();
    expect(names()).toEqual(["one.png", "three.png"]);
    expect($("#notices").textContent).toContain("old.bmp is not a picture Companion reads");
  });

  it("pictures go with the message and are cleared after it; a refused send keeps them", async () => {
    chat.setReadsPictures(true);
    const composer = $<HTMLTextAreaElement>("#composer");
    paste([png("cat.png")]);
    await read();
    typeInto(composer, "What is this?");
    press(composer, "Enter");
    await settle();
    expect(pending).toHaveLength(1);
    expect(pending[0].args.text).toBe("What is this?");
    expect(pending[0].args.pictures).toEqual(["data:image/png;base64,iVBORw=="]);
    expect($("#pending-pictures").hidden).toBe(true);

    // refused before the message was saved: its text and its picture come back
    pending[0].reject({ code: "no_projector", message: "gemma.gguf reads no pictures." });
    await settle();
    expect(composer.value).toBe("What is this?");
    expect($$(".pending-picture")).toHaveLength(1);
    expect($(".chat-error-text").textContent).toContain("reads no pictures");

    press(composer, "Enter");
    await settle();
    expect(pending[1].args.pictures).toEqual(["data:image/png;base64,iVBORw=="]);
    const user = msg(0, "user", "What is this?", { pictures: [{ sha256: CAT_SHA, mimeType: "image/png" }] });
    pending[1].channel.onmessage({ event: "user", data: user });
    await settle();
    // the sent message shows its picture, read back from the store
    expect(backend.callsOf("picture")).toEqual([{ sha256: CAT_SHA }]);
    expect($('.message[data-role="user"] img.message-picture').getAttribute("src")).toBe(
      `data:image/png;base64,${CAT_SHA.slice(0, 8)}`,
    );
    const reply = msg(1, "assistant", "A cat.");
    pending[1].channel.onmessage({ event: "done", data: reply });
    pending[1].resolve(reply);
    await settle();
    expect($$(".pending-picture")).toHaveLength(0);

    // a message without pictures is sent as before
    typeInto(composer, "Thanks.");
    press(composer, "Enter");
    await settle();
    expect("pictures" in pending[2].args).toBe(false);
  });

  it("a stored message shows its pictures above its text, read once", async () => {
    await chat.open("c1");
    await settle();
    const user = $('.message[data-role="user"]');
    const thumbs = Array.from(user.querySelectorAll<HTMLImageElement>(".message-pictures img.message-picture"));
    expect(thumbs.map((t) => t.dataset.sha256)).toEqual([CAT_SHA, DOG_SHA]);
    expect(thumbs.map((t) => t.alt)).toEqual(["Picture 1 of 2", "Picture 2 of 2"]);
    expect(thumbs.map((t) => t.getAttribute("src"))).toEqual([
      `data:image/png;base64,${CAT_SHA.slice(0, 8)}`,
      `data:image/png;base64,${DOG_SHA.slice(0, 8)}`,
    ]);
    // above the text
    expect(user.firstElementChild?.classList.contains("message-pictures")).toBe(true);
    expect($('.message[data-role="assistant"] .message-pictures')).toBeNull();
    // shown again (another render): from what was read, not asked again
    await chat.open("c1", true);
    await settle();
    expect(backend.callsOf("picture")).toHaveLength(2);
    expect($(".message-picture").getAttribute("src")).toBe(`data:image/png;base64,${CAT_SHA.slice(0, 8)}`);
  });

  it("a picture that cannot be read leaves its place marked, and is not asked again", async () => {
    invokeMock.mockImplementationOnce(async () => {
      throw { code: "image_missing", message: "The picture is gone." };
    });
    const node = messageNode(msg(0, "user", "x", { pictures: [{ sha256: CAT_SHA, mimeType: "image/png" }] }), {
      regenerable: false,
      editText: null,
      busy: false,
      html: () => "",
    });
    document.body.append(node);
    const { fillPictures } = await import("../src/pictures");
    fillPictures(document.body);
    await settle();
    expect(node.querySelector(".message-picture")!.classList.contains("missing")).toBe(true);
  });

  it("tells picture paths from document paths by their extension", () => {
    expect(["a.png", "B.JPG", "c.jpeg", "d.webp", "e.gif"].every(isPicturePath)).toBe(true);
    expect(["report.pdf", "notes.txt", "png", ".png", "x.png.txt"].some(isPicturePath)).toBe(false);
  });
});
