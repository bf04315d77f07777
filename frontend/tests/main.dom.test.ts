// The whole page booted against a fake backend: start-up opens the most recent conversation,
// the status line fills, settings validate and save, switching the model goes through the
// loading view, a dropped file is summarized with a progress card, and dropped pictures wait in
// the composer once the model reads pictures.
import { beforeAll, describe, expect, it, vi } from "vitest";
import { fakeBackend, loadPage, press, settle, typeInto, type FakeBackend } from "./page";
import type { FakeChannel } from "./tauri-mock";
import type { AppState, ChatEvent, DocumentEvent, MessageView, Settings } from "../src/types";

const drop = vi.hoisted(() => ({ handler: null as null | ((event: { payload: unknown }) => void) }));

vi.mock("@tauri-apps/api/core", async () => {
  const { FakeChannel } = await import("./tauri-mock");
  return { invoke: vi.fn(), Channel: FakeChannel };
});
vi.mock("@tauri-apps/api/webview", () => ({
  getCurrentWebview: () => ({
    onDragDropEvent: async (handler: (event: { payload: unknown }) => void) => {
      drop.handler = handler;
      return () => undefined;
    },
  }),
}));

import { invoke } from "@tauri-apps/api/core";

const invokeMock = vi.mocked(invoke) as unknown as ReturnType<typeof vi.fn>;
const $ = <T extends Element = HTMLElement>(s: string) => document.querySelector<T>(s)!;
const $$ = (s: string) => Array.from(document.querySelectorAll<HTMLElement>(s));

const settings: Settings = {
  temperature: 0.8,
  topP: 0.95,
  topK: 64,
  repetitionPenalty: 1,
  maxTokens: 512,
  speculation: "lookup",
  contextSize: 4096,
  threads: 4,
  device: "cpu",
  systemPrompt: "Be brief.",
  fairRate: 0.7,
  seriousRate: 0.4,
  theme: "dark",
  apiEnabled: false,
  apiPort: 7878,
};
// The Rust side also sends modelPath when a model was chosen; saving must send it back.
const fromBackend = { ...settings, modelPath: "/m/gemma.gguf" } as Settings;

const BASE_NOTICE = "This is a base model: it continues the text it is given.";

function msg(seq: number, role: MessageView["role"], text: string): MessageView {
  return { id: seq, seq, role, text, status: "complete", createdAt: seq, stats: null };
}

describe("the app", () => {
  let backend: FakeBackend;
  let appStates: AppState[];
  let documentChannel: FakeChannel<DocumentEvent> | null = null;
  let finishDocument: ((value: { conversationId: string }) => void) | null = null;
  let chatChannel: FakeChannel<ChatEvent> | null = null;
  /** The mocked remove_model was called: list_models leaves v2 out from then on. */
  let removed = false;
  let finishReply: ((value: MessageView) => void) | null = null;
  /** What sync brought: the status poll's counter and the list it changed. */
  let syncChanges = 0;
  /** The status poll's answer: whether the loaded model reads pictures. */
  let readsPictures = false;
  let listed = [
    { id: "old", title: "Old", pinned: true, createdAt: 0, updatedAt: 1, messageCount: 2, preview: null, tools: false },
    { id: "recent", title: "Recent", pinned: false, createdAt: 0, updatedAt: 9, messageCount: 2, preview: null, tools: false },
  ];
  const ready: AppState = { phase: "ready", stage: null, error: null, notices: ["The database was damaged and set aside."] };

  beforeAll(async () => {
    loadPage();
    document.body.dataset.phase = "loading";
    appStates = [{ phase: "loading", stage: "Loading the model", error: null, notices: [] }, ready];
    backend = fakeBackend(invokeMock, {
      app_state: () => appStates.shift() ?? ready,
      status: () => ({
        phase: "ready",
        backend: "cpu",
        lastReply: { timeToFirstTokenMs: 240, tokensPerSecond: 31.6, promptTokens: 10, reusedTokens: 0, generatedTokens: 20, stopReason: "end_of_turn" },
        memoryBytes: 253_113_024,
        thermal: "fair",
        thermalMessage: "The device is warm; replies are paced at 70%.",
        busy: false,
        modelNotice: BASE_NOTICE,
        readsPictures,
        syncChanges,
      }),
      list_conversations: () => listed,
      open_conversation: ({ id }) => ({
        conversation: { id, title: id === "doc" ? "report.txt" : "Recent", pinned: false, createdAt: 0, updatedAt: 9, messageCount: 2, preview: null, tools: false },
        messages: [msg(1, "user", "hi"), msg(2, "assistant", "Hello **there**")],
        resume: { kind: "snapshot", tokens: 20 },
      }),
      get_settings: () => ({ ...fromBackend }),
      set_settings: ({ settings: next }) => ({ settings: next, reloading: false }),
      api_status: () =>
        backend.callsOf("set_settings").some((c) => (c as { settings: Settings }).settings.apiEnabled)
          ? { running: true, url: "http://127.0.0.1:7878/v1", token: "t0k3n", tokenFile: "/data/companion/api-token", problem: null }
          : { running: false, url: null, token: null, tokenFile: "/data/companion/api-token", problem: null },
      log_folder: () => "/data/companion/logs",
      sync_status: () => ({
        folder: null, device: "0123456789abcdef", syncing: false, lastRoundAt: null, lastOutcome: null,
        lastError: null, unsent: 0, waiting: 0, devices: 0,
      }),
      open_log_folder: () => "/data/companion/logs",
      model_info: () => ({
        fileName: "gemma.gguf",
        path: "/m/gemma.gguf",
        name: "Gemma 3 270M",
        architecture: "gemma3",
        family: "Gemma 3",
        layout: "gemma3, 18 layers (15 sliding, window 512), 640 wide",
        parameters: 268_098_176,
        quantization: "Q4_K_M",
        fileBytes: 253_113_024,
        sha256: "a5fd3b62",
        context: 4096,
        device: "cpu",
        backend: "host",
        memoryEstimateBytes: 400 * 1024 * 1024,
        kvBytesPerToken: 9216,
        loadSeconds: 1.5,
        tuning: "base",
        tuningNotice: BASE_NOTICE,
        readsPictures: false,
        projector: null,
      }),
      list_models: () =>
        [
          { path: "/m/gemma.gguf", fileName: "gemma.gguf", bytes: 253_113_024, current: true, name: "Gemma 3 270m", version: 1, sha256: "a5fd3b62230aa5ec" },
          { path: "/m/gemma-v2.gguf", fileName: "gemma-v2.gguf", bytes: 253_200_000, current: false, name: "Gemma 3 270m", version: 2, sha256: "0123456789abcdef" },
          { path: "/m/other.gguf", fileName: "other.gguf", bytes: 806_000_000, current: false, name: null, version: null, sha256: null },
        ].filter((m) => !(removed && m.version === 2)),
      verify_model: ({ path }) => ({
        label: path === "/m/gemma.gguf" ? "Gemma 3 270m v1" : "Gemma 3 270m v2",
        matches: path === "/m/gemma.gguf",
        expected: path === "/m/gemma.gguf" ? "a5fd3b62230aa5ec" : "0123456789abcdef",
        found: path === "/m/gemma.gguf" ? "a5fd3b62230aa5ec" : "fedcba9876543210",
      }),
      import_model: () => ({
        path: "/m/gemma.gguf", fileName: "gemma.gguf", bytes: 253_113_024, current: true,
        name: "Gemma 3 270m", version: 1, sha256: "a5fd3b62230aa5ec", pairedAssistant: true,
      }),
      remove_model: () => {
        removed = true;
        return { fileDeleted: true };
      },
      switch_model: ({ path }) => {
        if (path === "/m/other.gguf") {
          throw {
            code: "self_check_failed",
            message: "other.gguf failed its self-check, so Gemma 3 270m v1 stays in use: its output is not a number.",
          };
        }
        appStates = [{ phase: "loading", stage: "Loading the model", error: null, notices: [] }, ready];
        return null;
      },
      summarize_dropped: ((args: { onEvent: unknown }) => {
        documentChannel = args.onEvent as FakeChannel<DocumentEvent>;
        return new Promise((resolve) => (finishDocument = resolve));
      }) as never,
      set_draft: () => null,
      send_message: ((args: { onEvent: unknown }) => {
        chatChannel = args.onEvent as FakeChannel<ChatEvent>;
        return new Promise((resolve) => (finishReply = resolve));
      }) as never,
      resume_reply: () => null,
      dropped_picture: ({ path }) => `data:image/png;base64,${btoa(path)}`,
    });
    await import("../src/main");
    await settle(450);
  });

  it("starts, opens the most recent conversation and fills the status line", () => {
    expect(document.body.dataset.phase).toBe("ready");
    expect(backend.callsOf("open_conversation")[0]).toEqual({ id: "recent" });
    expect($(".conversation-item.active").dataset.id).toBe("recent");
    expect($$(".message")).toHaveLength(2);
    expect($('.message[data-role="assistant"] .message-text strong').textContent).toBe("there");
    expect($("#conversation-title").textContent).toBe("Recent");
    expect($("#status-backend").textContent).toBe("CPU");
    expect($("#status-speed").textContent).toBe("32 tok/s");
    expect($("#status-ttft").textContent).toContain("240 ms");
    expect($("#status-memory").textContent).toBe("241 MB");
    expect($("#status-thermal").title).toBe("The device is warm; replies are paced at 70%.");
    expect($("#notices").textContent).toContain("The database was damaged and set aside.");
    expect(document.documentElement.dataset.theme).toBe("dark");
  });

  it("checks the settings and saves them", async () => {
    press(document.body, ",", { ctrlKey: true });
    // until the values in force are in, the form says so and takes no input
    expect($("#settings-panel").dataset.state).toBe("loading");
    expect($("#setting-temperature").closest("fieldset")!.disabled).toBe(true);
    expect($<HTMLButtonElement>("#settings-save").disabled).toBe(true);
    await settle();
    expect($("#settings-panel").hidden).toBe(false);
    expect($("#settings-panel").dataset.state).toBe("ready");
    expect($("#setting-temperature").closest("fieldset")!.disabled).toBe(false);
    expect($<HTMLInputElement>("#setting-temperature").value).toBe("0.8");
    expect($<HTMLTextAreaElement>("#setting-systemPrompt").value).toBe("Be brief.");
    $<HTMLInputElement>("#setting-temperature").value = "5";
    $("#settings-save").click();
    await settle();
    expect($("#settings-panel .panel-error").textContent).toBe("Temperature must be between 0 and 2.");
    expect(backend.callsOf("set_settings")).toHaveLength(0);

    $<HTMLInputElement>("#setting-temperature").value = "0.5";
    $<HTMLSelectElement>("#setting-theme").value = "light";
    expect($<HTMLSelectElement>("#setting-speculation").value).toBe("lookup");
    $<HTMLSelectElement>("#setting-speculation").value = "off";
    $("#settings-save").click();
    await settle();
    expect(backend.callsOf("set_settings")).toEqual([
      { settings: { ...fromBackend, temperature: 0.5, theme: "light", speculation: "off" } },
    ]);
    expect($("#settings-panel").hidden).toBe(true);
    expect(document.documentElement.dataset.theme).toBe("light");
  });

  it("switches the local API on from the settings and copies its token", async () => {
    const writeText = vi.fn(async () => undefined);
    Object.defineProperty(navigator, "clipboard", { value: { writeText }, configurable: true });
    press(document.body, ",", { ctrlKey: true });
    await settle();
    expect($<HTMLInputElement>("#setting-apiEnabled").checked).toBe(false);
    expect($<HTMLInputElement>("#setting-apiPort").value).toBe("7878");
    expect($("#api-status").textContent).toContain("Off.");
    expect($("#api-copy-token").hidden).toBe(true);

    $<HTMLInputElement>("#setting-apiEnabled").checked = true;
    $("#settings-save").click();
    await settle();
    expect(backend.callsOf("set_settings").at(-1)).toEqual({ settings: { ...fromBackend, apiEnabled: true } });
    press(document.body, ",", { ctrlKey: true });
    await settle();
    expect($("#api-status").textContent).toContain("http://127.0.0.1:7878/v1");
    $("#api-copy-token").click();
    await settle();
    expect(writeText).toHaveBeenCalledWith("t0k3n");
  });

  it("opens the log folder from the settings and shows where it is", async () => {
    press(document.body, ",", { ctrlKey: true });
    await settle();
    expect($("#log-folder-path").textContent).toBe("/data/companion/logs");
    expect(backend.callsOf("open_log_folder")).toHaveLength(0);
    $("#open-log-folder").click();
    await settle();
    expect(backend.callsOf("open_log_folder")).toHaveLength(1);
  });

  it("Escape closes a panel", async () => {
    $("#open-model").click();
    await settle();
    expect($("#model-panel").hidden).toBe(false);
    expect($("#model-details").textContent).toContain("268 M");
    expect($("#model-details").textContent).toContain("Q4_K_M");
    expect($("#model-details").textContent).toContain("Gemma 3 (gemma3)");
    expect($("#model-details").textContent).toContain("18 layers (15 sliding, window 512)");
    // a base model is marked as one, with the sentence that explains it
    expect($("#model-details").textContent).toContain("Base model (continues text)");
    expect($("#model-tuning-notice").hidden).toBe(false);
    expect($("#model-tuning-notice").textContent).toBe(BASE_NOTICE);
    // no assistant is paired with it: drafts come from the conversation
    expect($("#model-details").textContent).toContain("None (drafts for speculation come from the conversation)");
    press(document.body, "Escape");
    expect($("#model-panel").hidden).toBe(true);
  });

  it("an imported Gemma 4 assistant is reported as paired with its model", async () => {
    $("#open-model").click();
    await settle();
    $("#import-model").click();
    await settle();
    expect($("#model-panel .panel-message").textContent).toBe(
      "Paired Gemma 3 270m v1 with its Gemma 4 assistant; it drafts for the model from now on.",
    );
    press(document.body, "Escape");
  });

  it("lists the library's versions, and a model that fails its self-check is not switched to", async () => {
    $("#open-model").click();
    await settle();
    const rows = [...document.querySelectorAll(".model-file")].map((li) => li.querySelector(".model-name > span")?.textContent);
    expect(rows).toEqual(["Gemma 3 270m v1", "Gemma 3 270m v2", "other.gguf"]);
    expect($(".model-file.current .tag").textContent).toBe("In use");
    expect($('[data-path="/m/gemma-v2.gguf"] .model-sha').textContent).toBe("0123456789ab");
    $<HTMLButtonElement>('[data-path="/m/other.gguf"] .use-model').click();
    await settle();
    expect($("#model-panel").hidden).toBe(false);
    expect($("#model-panel .panel-error").textContent).toBe(
      "Other.gguf failed its self-check, so Gemma 3 270m v1 stays in use: its output is not a number. (code: self_check_failed)",
    );
    expect(document.body.dataset.phase).toBe("ready");
    press(document.body, "Escape");
  });

  it("verifies a library model and removes one after asking, never the model in use", async () => {
    $("#open-model").click();
    await settle();
    // the model in use can be verified but not removed; a file outside the library neither
    expect($('[data-path="/m/gemma.gguf"] .remove-model')).toBeNull();
    expect($('[data-path="/m/gemma.gguf"] .verify-model')).not.toBeNull();
    expect($('[data-path="/m/other.gguf"] .verify-model')).toBeNull();
    expect($('[data-path="/m/other.gguf"] .remove-model')).toBeNull();

    $('[data-path="/m/gemma.gguf"] .verify-model').click();
    await settle();
    expect(backend.callsOf("verify_model").at(-1)).toMatchObject({ path: "/m/gemma.gguf" });
    expect($("#model-panel .panel-message").textContent).toBe("Gemma 3 270m v1 is intact: its SHA-256 is still a5fd3b62230a….");
    expect($("#model-panel .panel-error").hidden).toBe(true);

    $('[data-path="/m/gemma-v2.gguf"] .verify-model').click();
    await settle();
    expect($("#model-panel .panel-error").textContent).toContain("Gemma 3 270m v2 is damaged: its SHA-256 is now fedcba987654…");

    // Remove asks first; "Cancel" keeps the model
    $('[data-path="/m/gemma-v2.gguf"] .remove-model').click();
    await settle();
    expect($("#confirm-dialog").hidden).toBe(false);
    expect($("#confirm-title").textContent).toBe("Remove Gemma 3 270m v2?");
    $("#confirm-cancel").click();
    await settle();
    expect(backend.callsOf("remove_model")).toHaveLength(0);
    expect($("#model-panel").hidden).toBe(false);

    $('[data-path="/m/gemma-v2.gguf"] .remove-model').click();
    await settle();
    $("#confirm-ok").click();
    await settle();
    expect(backend.callsOf("remove_model")).toEqual([{ path: "/m/gemma-v2.gguf" }]);
    expect($("#model-panel .panel-message").textContent).toBe("Removed Gemma 3 270m v2 and its file.");
    expect($('[data-path="/m/gemma-v2.gguf"]')).toBeNull();
    expect($("#model-panel").hidden).toBe(false);
    press(document.body, "Escape");
    removed = false;
  });

  it("switches the model through the loading view", async () => {
    $("#open-model").click();
    await settle();
    $(".use-model").click();
    await settle();
    expect(backend.callsOf("switch_model").at(-1)).toEqual({ path: "/m/gemma-v2.gguf" });
    expect($("#model-panel").hidden).toBe(true);
    expect(document.body.dataset.phase).toBe("loading");
    await settle(450);
    expect(document.body.dataset.phase).toBe("ready");
  });

  it("summarizes a dropped file and opens its conversation", async () => {
    expect(drop.handler).not.toBeNull();
    drop.handler!({ payload: { type: "enter", paths: ["/tmp/report.txt"], position: { x: 0, y: 0 } } });
    expect($("#drop-overlay").hidden).toBe(false);
    drop.handler!({ payload: { type: "drop", paths: ["/tmp/report.txt"], position: { x: 0, y: 0 } } });
    await settle();
    expect($("#drop-overlay").hidden).toBe(true);
    expect(backend.callsOf("summarize_dropped")[0].path).toBe("/tmp/report.txt");
    expect($("#document-progress").hidden).toBe(false);
    expect($("#document-progress .model-notice").textContent).toBe(BASE_NOTICE);
    documentChannel!.onmessage({ event: "started", data: { fileName: "report.txt" } });
    documentChannel!.onmessage({
      event: "progress",
      data: { level: 0, done: 3, total: 10, reused: 0, elapsedSeconds: 9, remainingSeconds: 21, paused: false },
    });
    expect($("#document-progress").textContent).toContain("3 / 10 summaries");
    expect($("#document-progress").textContent).toContain("About 21 s left");
    documentChannel!.onmessage({ event: "done", data: { conversationId: "doc", title: "report.txt" } });
    finishDocument!({ conversationId: "doc" });
    await settle(50);
    expect($("#document-progress").hidden).toBe(true);
    expect(backend.callsOf("open_conversation").at(-1)).toEqual({ id: "doc" });
    expect($("#conversation-title").textContent).toBe("report.txt");
  });

  it("keeps dropped pictures for the next message once the model reads pictures", async () => {
    const attach = $<HTMLButtonElement>("#attach");
    const summaries = backend.callsOf("summarize_dropped").length;
    // the model has no projector: the attach button says why, and a dropped picture is not
    // summarized as a document, nor kept
    expect(attach.disabled).toBe(true);
    expect(attach.title).toContain("reads no pictures");
    drop.handler!({ payload: { type: "enter", paths: ["/tmp/cat.png"], position: { x: 0, y: 0 } } });
    expect($("#drop-overlay").textContent).toContain("pictures");
    drop.handler!({ payload: { type: "drop", paths: ["/tmp/cat.png"], position: { x: 0, y: 0 } } });
    await settle();
    expect($("#notices").textContent).toContain(
      "This model reads no pictures: import its vision projector (an mmproj file) beside it.",
    );
    expect(backend.callsOf("dropped_picture")).toHaveLength(0);
    expect(backend.callsOf("summarize_dropped")).toHaveLength(summaries);
    expect($("#pending-pictures").hidden).toBe(true);

    // the model was reloaded with its projector: the next status poll enables the button
    readsPictures = true;
    await settle(2200);
    expect(attach.disabled).toBe(false);
    drop.handler!({ payload: { type: "drop", paths: ["/tmp/cat.png", "/tmp/dog.JPG"], position: { x: 0, y: 0 } } });
    await settle();
    expect(backend.callsOf("dropped_picture")).toEqual([{ path: "/tmp/cat.png" }, { path: "/tmp/dog.JPG" }]);
    const thumbs = $$("#pending-pictures .pending-picture img");
    expect(thumbs.map((i) => i.getAttribute("alt"))).toEqual(["cat.png", "dog.JPG"]);
    expect(thumbs[0].getAttribute("src")).toBe(`data:image/png;base64,${btoa("/tmp/cat.png")}`);
    expect(backend.callsOf("summarize_dropped")).toHaveLength(summaries);
    $("#pending-pictures .remove-picture").click();
    expect($$("#pending-pictures .pending-picture img").map((i) => i.getAttribute("alt"))).toEqual(["dog.JPG"]);
    $("#pending-pictures .remove-picture").click();
    expect($("#pending-pictures").hidden).toBe(true);
    readsPictures = false;
  }, 10_000);

  it("Ctrl+K focuses the search box", () => {
    press(document.body, "k", { ctrlKey: true });
    expect(document.activeElement).toBe($("#search"));
    typeInto($<HTMLInputElement>("#search"), "x");
    press($("#search"), "Escape");
    expect($<HTMLInputElement>("#search").value).toBe("");
  });

  it("a reply paused by a very hot device goes on when the user asks", async () => {
    const composer = $<HTMLTextAreaElement>("#composer");
    typeInto(composer, "Tell me more.");
    press(composer, "Enter");
    await settle();
    expect(chatChannel).not.toBeNull();
    chatChannel!.onmessage({ event: "user", data: msg(3, "user", "Tell me more.") });
    chatChannel!.onmessage({
      event: "thermal",
      data: { state: "critical", previous: "serious", ratePercent: 0, fewerThreads: true, backgroundPaused: true, message: "The device is very hot: the reply is paused." },
    });
    await settle();
    expect($("#notices").textContent).toContain("the reply is paused");
    $(".resume-reply").click();
    await settle();
    expect(backend.callsOf("resume_reply")).toHaveLength(1);
    expect(document.querySelector(".resume-reply")).toBeNull();
    const reply = { ...msg(4, "assistant", "More."), stats: null };
    chatChannel!.onmessage({ event: "done", data: reply });
    finishReply!(reply);
    await settle();
  });

  it("shows again an open conversation another device changed, and closes one it deleted", async () => {
    $('.conversation-item[data-id="recent"] .conversation-title').click();
    await settle();
    const opened = () => backend.callsOf("open_conversation").filter((a) => (a as { id: string }).id === "recent").length;
    const before = opened();
    // the other device appended to it: the next status poll says sync changed something
    listed = listed.map((c) => (c.id === "recent" ? { ...c, updatedAt: 10, messageCount: 3 } : c));
    syncChanges = 1;
    await settle(2200);
    expect(opened()).toBe(before + 1);
    // a sync that did not touch it does not reopen it
    syncChanges = 2;
    await settle(2200);
    expect(opened()).toBe(before + 1);
    // deleted there: nothing is open here any more
    listed = listed.filter((c) => c.id !== "recent");
    syncChanges = 3;
    await settle(2200);
    expect(document.querySelector(".conversation-item.active")).toBeNull();
  }, 10_000);
});
