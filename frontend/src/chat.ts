// The chat of the open conversation: the message list (#messages), the composer (#composer,
// #send, #stop) and the replies streaming into it (send, regenerate, edit, stop). Owns which
// conversation is open on this side and the draft prefill (`set_draft`, debounced). The Tools
// switch (#tools-switch) turns the agent's tools on for the open conversation: its replies then
// show their calls, and a write waits at an approval card until the user answers. Pictures go
// with a message when the model reads them: attached (#attach and its hidden #attach-input),
// pasted into the composer or dropped on it, they wait as thumbnails (#pending-pictures) until
// the message is sent, and a message shows its pictures above its text.
import type { Channel } from "@tauri-apps/api/core";
import { call, channel, errorCode, errorText } from "./api";
import { showError, showNotice } from "./banner";
import {
  applyChatEvent,
  beginReply,
  chatWithMessages,
  emptyChat,
  regenerableSeq,
  type ChatState,
} from "./chat-stream";
import { handleCodeCopy } from "./clipboard";
import { debounce } from "./debounce";
import { el, required } from "./dom";
import { renderMarkdown } from "./markdown";
import { emptyChatNode, failureNode, messageNode, paintStreaming, streamingNode } from "./message-view";
import {
  cachedPicture,
  createPictureTray,
  fillPictures,
  NO_PROJECTOR_NOTICE,
  pictureFiles,
  type PendingPicture,
} from "./pictures";
import type { ChatEvent, ConversationItem, MessageView, OpenedConversation, ThermalNotice } from "./types";

export const DRAFT_DEBOUNCE_MS = 150;
/** Shown above a conversation that was held with another model (Resume `otherModel`). */
export const OTHER_MODEL_NOTICE =
  "This conversation was held with another model. Its history was read again on the model in use now, which writes the replies from here on.";
/** The streaming bubble is re-rendered at most this often (five times a second). Each paint
 *  re-renders the reply's Markdown and the webview lays out and draws the bubble again; where
 *  WebKit draws on the CPU (Linux without a GPU), painting every 50 ms took a third of the
 *  engine's decode rate (scripts/bench-app: 0.64 of the CLI's). With text batches of 100 ms and
 *  no compositing, the interface's CPU while a reply streams was 17% of a core at 150 ms and
 *  14% at 200 ms (bench-app's "UI CPU"; 8% with the message list hidden). */
export const STREAM_PAINT_MS = 200;
const HIGHLIGHT_MS = 2000;
/** How long a notice about pictures (none read, some left out) stays. */
const PICTURE_NOTICE_MS = 10_000;
export const ATTACH_TITLE = "Attach pictures (PNG, JPEG, WebP or GIF)";

export interface ChatHooks {
  /** A conversation was opened or created (null: none is open any more). */
  onConversation(item: ConversationItem | null): void;
  /** The user's message is saved (the reply is about to stream): the conversation list can
   *  show it at once instead of "No messages yet" until the reply ends. */
  onUserMessage?(): void;
  /** A reply ended (done, stopped or failed): `reply` is the final message when there is one. */
  onReplyFinished(reply: MessageView | null): void;
  onThermal(notice: ThermalNotice): void;
}

export interface ChatView {
  /** Opens a conversation; the open one is only opened again with `force` (e.g. after the
   *  engine reloaded), since opening stops a running reply. */
  open(id: string, force?: boolean): Promise<boolean>;
  newConversation(): Promise<void>;
  /** Nothing is open any more (the open conversation was deleted). */
  clear(): void;
  send(): Promise<void>;
  stop(): Promise<void>;
  isStreaming(): boolean;
  currentId(): string | null;
  /** Scrolls to the message with this seq and flashes it. */
  highlight(seq: number): boolean;
  focusComposer(): void;
  /** The loaded model's notice for a new conversation (a base model's), or null. */
  setModelNotice(notice: string | null): void;
  /** Whether the loaded model reads pictures (a vision projector is loaded beside it). */
  setReadsPictures(on: boolean): void;
  /** Picture files dropped on the window (paths the Rust side reads): they wait in the
   *  composer like attached ones. */
  addDroppedPictures(paths: string[]): Promise<void>;
}

interface Stream {
  settled: boolean;
  sawUser: boolean;
}

const raf: (cb: (now: number) => void) => void =
  typeof requestAnimationFrame === "function"
    ? (cb) => requestAnimationFrame(cb)
    : (cb) => setTimeout(() => cb(performance.now()), 16);

export function createChat(hooks: ChatHooks): ChatView {
  const list = required("#messages");
  const composer = required<HTMLTextAreaElement>("#composer");
  const sendButton = required<HTMLButtonElement>("#send");
  const stopButton = required<HTMLButtonElement>("#stop");
  const toolsSwitch = required<HTMLInputElement>("#tools-switch");
  const composerForm = required("#composer-form");
  const attachButton = required<HTMLButtonElement>("#attach");
  const attachInput = required<HTMLInputElement>("#attach-input");
  const tray = createPictureTray(required("#pending-pictures"));
  let readsPictures = false;

  let state: ChatState = emptyChat;
  let modelNotice: string | null = null;
  /** Set when the open conversation was held with another model, until a reply is made. */
  let otherModel = false;
  let conversation: ConversationItem | null = null;
  let stream: Stream | null = null;
  let sending = false;
  let openToken = 0;
  let editing: { id: number; text: string } | null = null;
  let paintPending = false;
  let lastPaint = 0;
  const htmlCache = new Map<number, { text: string; html: string }>();

  const sendDraft = debounce((text: string) => {
    if (!text.trim()) return;
    call("set_draft", { text }).catch(() => {
      // The draft is only a head start for the engine; a failure costs nothing.
    });
  }, DRAFT_DEBOUNCE_MS);

  function html(message: MessageView): string {
    const cached = htmlCache.get(message.id);
    if (cached && cached.text === message.text) return cached.html;
    const rendered = renderMarkdown(message.text);
    htmlCache.set(message.id, { text: message.text, html: rendered });
    return rendered;
  }

  function nearBottom(): boolean {
    return list.scrollHeight - list.scrollTop - list.clientHeight < 80;
  }

  function scrollToBottom(): void {
    list.scrollTop = list.scrollHeight;
  }

  function render(): void {
    const regenerable = regenerableSeq(state);
    const busy = stream !== null;
    const nodes: Node[] = [];
    if (!state.messages.length && !state.streaming && !state.failure) {
      nodes.push(emptyChatNode(conversation !== null, modelNotice));
    }
    if (otherModel) nodes.push(el("p", { class: "model-notice other-model", role: "note", text: OTHER_MODEL_NOTICE }));
    for (const message of state.messages) {
      nodes.push(
        messageNode(message, {
          regenerable: message.seq === regenerable,
          editText: editing?.id === message.id ? editing.text : null,
          busy,
          html,
          pictureSrc: cachedPicture,
        }),
      );
    }
    if (state.streaming) nodes.push(streamingNode(state.streaming));
    if (state.failure) nodes.push(failureNode(state.failure, state.failure.canRetry && !busy));
    const stick = nearBottom();
    list.replaceChildren(...nodes);
    fillPictures(list);
    if (stick) scrollToBottom();
  }

  function paintStream(): void {
    const bubble = list.querySelector<HTMLElement>('.message[data-status="streaming"]');
    if (!bubble || !state.streaming) return;
    const stick = nearBottom();
    paintStreaming(bubble, state.streaming);
    if (stick) scrollToBottom();
  }

  // A timer until the next paint is due, then one animation frame: asking for a frame on every
  // frame while waiting kept the webview's rendering loop running between paints.
  function schedulePaint(): void {
    if (paintPending) return;
    paintPending = true;
    const wait = Math.max(0, lastPaint + STREAM_PAINT_MS - performance.now());
    setTimeout(
      () =>
        raf((now) => {
          paintPending = false;
          lastPaint = now;
          paintStream();
        }),
      wait,
    );
  }

  function setStreamingUi(on: boolean): void {
    sendButton.hidden = on;
    sendButton.disabled = on;
    stopButton.hidden = !on;
    stopButton.disabled = false;
    document.body.classList.toggle("streaming", on);
  }

  function finish(s: Stream, reply: MessageView | null): void {
    s.settled = true;
    // a reply made on this model: the conversation is held with it now
    if (reply) otherModel = false;
    if (stream === s) stream = null;
    setStreamingUi(false);
    render();
    hooks.onReplyFinished(reply);
  }

  function onEvent(s: Stream, event: ChatEvent): void {
    if (s !== stream || s.settled) return;
    state = applyChatEvent(state, event);
    switch (event.event) {
      case "user":
        s.sawUser = true;
        render();
        scrollToBottom();
        hooks.onUserMessage?.();
        break;
      case "summarizing":
        paintStream();
        break;
      case "text":
        schedulePaint();
        break;
      case "thermal":
        hooks.onThermal(event.data);
        break;
      case "tool": {
        const wasTyping = document.activeElement === composer && composer.value.trim() !== "";
        render();
        // a write waits: the card takes the focus (Enter allows, Escape denies), unless the
        // user is typing their next message
        if (event.data.event === "waitingForApproval" && !wasTyping) {
          list.querySelector<HTMLElement>(".approval-card .approve")?.focus();
        }
        break;
      }
      case "done":
        finish(s, event.data);
        break;
      case "error":
        finish(s, null);
        break;
    }
  }

  /** What a refused send gives back to the composer: its text and its pictures. */
  interface Unsent {
    text: string;
    pictures: PendingPicture[];
  }

  async function runStream(
    start: (ch: Channel<ChatEvent>) => Promise<MessageView>,
    restore: Unsent | null,
  ): Promise<void> {
    const s: Stream = { settled: false, sawUser: false };
    stream = s;
    state = beginReply(state);
    setStreamingUi(true);
    render();
    scrollToBottom();
    try {
      const reply = await start(channel<ChatEvent>((event) => onEvent(s, event)));
      // The result can arrive before the last events: it is the same final message.
      if (s === stream && !s.settled) {
        state = applyChatEvent(state, { event: "done", data: reply });
        finish(s, reply);
      }
    } catch (error) {
      if (s === stream && !s.settled) {
        if (!s.sawUser && restore) {
          if (!composer.value.trim()) {
            composer.value = restore.text;
            resizeComposer();
          }
          tray.restore(restore.pictures);
        }
        state = applyChatEvent(state, {
          event: "error",
          data: { code: errorCode(error) ?? "error", message: errorText(error) },
        });
        finish(s, null);
      }
    }
  }

  /** Forget the running reply on this side (the backend stops it when switching). */
  function detachStream(): void {
    if (!stream) return;
    stream.settled = true;
    stream = null;
    state = { ...state, streaming: null };
    setStreamingUi(false);
    render();
  }

  function load(opened: OpenedConversation): void {
    conversation = opened.conversation;
    toolsSwitch.checked = conversation.tools;
    otherModel = opened.resume.kind === "otherModel";
    state = chatWithMessages(opened.messages);
    editing = null;
    htmlCache.clear();
    render();
    scrollToBottom();
    hooks.onConversation(conversation);
  }

  function resizeComposer(): void {
    composer.style.height = "auto";
    composer.style.height = `${Math.min(composer.scrollHeight, 240)}px`;
  }

  async function send(): Promise<void> {
    const text = composer.value.trim();
    if (!text || stream || sending) return;
    sendDraft.cancel();
    if (!conversation) {
      sending = true;
      sendButton.disabled = true;
      try {
        // the switch as the user set it before the first message goes with it
        const tools = toolsSwitch.checked;
        load(await call("create_conversation"));
        toolsSwitch.checked = tools;
      } catch (error) {
        showError(error);
        return;
      } finally {
        sending = false;
        sendButton.disabled = stream !== null;
      }
    }
    composer.value = "";
    resizeComposer();
    const tools = toolsSwitch.checked;
    const pictures = tray.take();
    const urls = pictures.map((p) => p.url);
    await runStream(
      (ch) => call("send_message", urls.length ? { text, tools, pictures: urls, onEvent: ch } : { text, tools, onEvent: ch }),
      { text, pictures },
    );
  }

  function pictureNotice(text: string): void {
    showNotice(text, { key: "pictures", timeoutMs: PICTURE_NOTICE_MS });
  }

  /** Pictures pasted, dropped or picked: they wait in the tray, unless the model reads none. */
  async function addPictures(files: File[]): Promise<void> {
    if (!files.length) return;
    if (!readsPictures) {
      pictureNotice(NO_PROJECTOR_NOTICE);
      return;
    }
    const problems = await tray.addFiles(files);
    if (problems.length) pictureNotice(problems.join(" "));
  }

  async function addDroppedPictures(paths: string[]): Promise<void> {
    if (!paths.length) return;
    if (!readsPictures) {
      pictureNotice(NO_PROJECTOR_NOTICE);
      return;
    }
    const read: { url: string; name: string }[] = [];
    const problems: string[] = [];
    for (const path of paths) {
      const name = path.split(/[\\/]/).pop() || path;
      try {
        read.push({ url: await call("dropped_picture", { path }), name });
      } catch (error) {
        problems.push(`${name}: ${errorText(error)}`);
      }
    }
    problems.push(...tray.addUrls(read));
    if (problems.length) pictureNotice(problems.join(" "));
    composer.focus();
  }

  function setReadsPictures(on: boolean): void {
    readsPictures = on;
    attachButton.disabled = !on;
    attachButton.title = on ? ATTACH_TITLE : NO_PROJECTOR_NOTICE;
  }

  async function stop(): Promise<void> {
    if (!stream) return;
    stopButton.disabled = true;
    try {
      await call("stop_reply");
    } catch (error) {
      stopButton.disabled = false;
      showError(error);
    }
  }

  function regenerate(): void {
    if (stream || sending) return;
    void runStream((ch) => call("regenerate", { onEvent: ch }), null);
  }

  function startEdit(id: number): void {
    if (stream) return;
    const message = state.messages.find((m) => m.id === id);
    if (!message) return;
    editing = { id, text: message.text };
    render();
    const input = list.querySelector<HTMLTextAreaElement>("textarea.edit-input");
    if (input) {
      input.focus();
      input.setSelectionRange(input.value.length, input.value.length);
    }
  }

  function cancelEdit(): void {
    editing = null;
    render();
  }

  function saveEdit(): void {
    if (!editing || stream) return;
    const input = list.querySelector<HTMLTextAreaElement>("textarea.edit-input");
    const text = (input?.value ?? editing.text).trim();
    if (!text) return;
    const messageId = editing.id;
    editing = null;
    void runStream((ch) => call("edit_message", { messageId, text, onEvent: ch }), null);
  }

  function answerApproval(answer: "yes" | "no" | "conversation"): void {
    for (const b of list.querySelectorAll<HTMLButtonElement>(".approval-card button")) b.disabled = true;
    call("answer_approval", { answer }).catch(showError);
    composer.focus();
  }

  toolsSwitch.addEventListener("change", () => {
    const id = conversation?.id;
    if (conversation) conversation = { ...conversation, tools: toolsSwitch.checked };
    if (id) call("set_conversation_tools", { id, enabled: toolsSwitch.checked }).catch(showError);
  });

  function idOf(target: Element): number | null {
    const id = target.closest<HTMLElement>(".message")?.dataset.id;
    return id === undefined ? null : Number(id);
  }

  list.addEventListener("click", (event) => {
    const target = event.target as Element;
    const link = target.closest("a");
    if (link && list.contains(link)) {
      // The app shows no web pages: a link in a reply never navigates the window away.
      event.preventDefault();
      return;
    }
    const button = target.closest("button");
    if (!button) return;
    const answer = button.dataset.answer;
    if (answer === "yes" || answer === "no" || answer === "conversation") {
      answerApproval(answer);
      return;
    }
    if (button.classList.contains("regenerate") || button.classList.contains("retry")) regenerate();
    else if (button.classList.contains("edit")) {
      const id = idOf(button);
      if (id !== null) startEdit(id);
    } else if (button.classList.contains("edit-save")) saveEdit();
    else if (button.classList.contains("edit-cancel")) cancelEdit();
  });
  list.addEventListener("input", (event) => {
    const target = event.target as HTMLElement;
    if (editing && target.matches("textarea.edit-input")) {
      editing.text = (target as HTMLTextAreaElement).value;
    }
  });
  list.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && (event.target as Element).closest(".approval-card")) {
      // Escape denies the write (and does not stop the reply: the model hears the refusal)
      event.stopPropagation();
      event.preventDefault();
      answerApproval("no");
      return;
    }
    if (!(event.target as Element).matches("textarea.edit-input")) return;
    if (event.key === "Escape") {
      event.stopPropagation();
      event.preventDefault();
      cancelEdit();
    } else if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      saveEdit();
    }
  });
  handleCodeCopy(list);

  composer.addEventListener("input", () => {
    resizeComposer();
    sendDraft(composer.value.trim());
  });
  composer.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      void send();
    }
  });
  sendButton.addEventListener("click", () => void send());
  stopButton.addEventListener("click", () => void stop());

  composer.addEventListener("paste", (event) => {
    const files = pictureFiles(event.clipboardData);
    if (!files.length) return;
    // a picture alone is not pasted as text; text copied with it still is
    if (!event.clipboardData?.getData("text/plain")) event.preventDefault();
    void addPictures(files);
  });
  composerForm.addEventListener("dragover", (event) => {
    if (event.dataTransfer?.types.includes("Files")) event.preventDefault();
  });
  composerForm.addEventListener("drop", (event) => {
    const files = pictureFiles(event.dataTransfer);
    if (!files.length) return;
    event.preventDefault();
    event.stopPropagation();
    void addPictures(files);
  });
  attachButton.addEventListener("click", () => {
    if (readsPictures) attachInput.click();
  });
  attachInput.addEventListener("change", () => {
    const files = Array.from(attachInput.files ?? []);
    attachInput.value = "";
    void addPictures(files);
  });

  setStreamingUi(false);
  setReadsPictures(false);
  render();

  return {
    async open(id, force = false) {
      if (conversation?.id === id && !force) return true;
      const token = ++openToken;
      detachStream();
      try {
        const opened = await call("open_conversation", { id });
        if (token !== openToken) return false;
        load(opened);
        return true;
      } catch (error) {
        if (token === openToken) showError(error);
        return false;
      }
    },
    async newConversation() {
      const token = ++openToken;
      if (stream) {
        await call("stop_reply").catch(() => undefined);
        detachStream();
      }
      try {
        const opened = await call("create_conversation");
        if (token !== openToken) return;
        load(opened);
        composer.focus();
      } catch (error) {
        showError(error);
      }
    },
    clear() {
      ++openToken;
      detachStream();
      conversation = null;
      toolsSwitch.checked = false;
      state = emptyChat;
      editing = null;
      render();
      hooks.onConversation(null);
    },
    send,
    stop,
    isStreaming: () => stream !== null,
    currentId: () => conversation?.id ?? null,
    setReadsPictures,
    addDroppedPictures,
    setModelNotice(notice) {
      if (notice === modelNotice) return;
      modelNotice = notice;
      render();
    },
    highlight(seq) {
      const node = list.querySelector<HTMLElement>(`.message[data-seq="${seq}"]`);
      if (!node) return false;
      node.scrollIntoView?.({ block: "center", behavior: "smooth" });
      node.classList.add("highlight");
      setTimeout(() => node.classList.remove("highlight"), HIGHLIGHT_MS);
      return true;
    },
    focusComposer: () => composer.focus(),
  };
}
