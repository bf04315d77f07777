// Starts the webview: builds every part, wires them together (opening conversations, reloads,
// shortcuts, drops), follows the app's phase, and catches every error at the top so the window
// is never blank and every failure reads as a sentence.
import "./styles.css";
import { call, errorMessage } from "./api";
import { createPhaseController, type PhaseController } from "./app-phase";
import { initBanners, showError, showNotice } from "./banner";
import { createChat } from "./chat";
import { initConfirm } from "./confirm";
import { mostRecent } from "./conversations";
import { createDocuments } from "./documents";
import { el, required } from "./dom";
import { createLayout } from "./layout";
import { closeTopModal } from "./modal";
import { createModelPanel } from "./model-panel";
import { createSearch } from "./search";
import { createSettingsPanel } from "./settings";
import { installShortcuts } from "./shortcuts";
import { createSidebar } from "./sidebar";
import type { ConversationItem } from "./types";
import { createStatusLine } from "./status-line";
import { createToolsPanel } from "./tools-panel";
import { watchReminders } from "./reminders";
import { applyTheme, restoreTheme } from "./theme";

function installErrorCatchers(): void {
  window.addEventListener("error", (event) => {
    const message = String(event.message ?? "");
    // Benign layout notices some webviews report as errors.
    if (message.includes("ResizeObserver")) return;
    showError(event.error ?? message);
  });
  window.addEventListener("unhandledrejection", (event) => {
    event.preventDefault();
    showError(event.reason);
  });
}

/** When the page itself could not be built: say so in place of the app. */
function fatal(error: unknown): void {
  document.body.dataset.phase = "failed";
  const box = document.createElement("div");
  box.className = "fatal";
  box.setAttribute("role", "alert");
  const heading = document.createElement("h1");
  heading.textContent = "Companion could not open its window";
  const text = document.createElement("p");
  text.id = "error-banner";
  text.textContent = errorMessage(error);
  box.append(heading, text);
  document.body.replaceChildren(box);
}

function boot(): void {
  restoreTheme();
  initBanners();
  initConfirm();
  installErrorCatchers();

  const title = required("#conversation-title");
  const layout = createLayout();
  let phase: PhaseController | null = null;

  // The loaded model's sentence for the user (a base model's), from the status polls.
  let modelNotice: string | null = null;
  // Sync brought changes from another device: the lists follow.
  let syncChanges = 0;
  const statusLine = createStatusLine((status, askedAt) => {
    if (status.syncChanges !== syncChanges) {
      syncChanges = status.syncChanges;
      const before = listed;
      void sidebar.refresh().then((after) => followSync(before, after));
    }
    // A reload started elsewhere (or the engine failed): follow it, unless the answer is older
    // than our own arrival at "ready".
    if (phase && phase.phase() === "ready" && status.phase !== "ready" && askedAt > phase.changedAt()) {
      phase.reload();
    }
    if (status.phase === "ready" && status.modelNotice !== modelNotice) {
      modelNotice = status.modelNotice;
      chat.setModelNotice(modelNotice);
    }
    // a model reloaded with (or without) its vision projector: the attach button follows
    chat.setReadsPictures(status.phase === "ready" && status.readsPictures === true);
  });

  // The list as it was before sync last changed it, to see what sync changed.
  let listed: ConversationItem[] = [];
  // Another device changed the open conversation: show it as it is now (deleted: nothing is
  // open), unless a reply is streaming here or the user is typing.
  function followSync(before: ConversationItem[], after: ConversationItem[]): void {
    const id = chat.currentId();
    if (!id) return;
    const now = after.find((i) => i.id === id);
    if (!now) {
      chat.clear();
      return;
    }
    const was = before.find((i) => i.id === id);
    const changed = was && (was.updatedAt !== now.updatedAt || was.messageCount !== now.messageCount);
    const composer = document.querySelector<HTMLTextAreaElement>("#composer");
    if (changed && !chat.isStreaming() && !composer?.value.trim()) void chat.open(id, true);
  }

  const chat = createChat({
    onConversation(item) {
      sidebar.setActive(item?.id ?? null);
      title.textContent = item?.title.trim() || "Companion";
      void sidebar.refresh();
    },
    onUserMessage() {
      void sidebar.refresh();
    },
    onReplyFinished(reply) {
      void sidebar.refresh();
      if (reply?.stats) statusLine.showReply(reply.stats);
    },
    onThermal(notice) {
      statusLine.showThermal(notice.state, notice.message);
      const paused = notice.ratePercent === 0;
      const shown = showNotice(notice.message, { key: "thermal", timeoutMs: paused ? undefined : 10_000 });
      if (paused) {
        // the reply waits for the device to cool down, unless the user chooses to go on
        const goOn = el("button", { type: "button", class: "resume-reply", text: "Go on anyway" });
        goOn.addEventListener("click", () => {
          shown.remove();
          call("resume_reply").catch(showError);
        });
        shown.insertBefore(goOn, shown.lastElementChild);
      }
    },
  });

  async function openConversation(id: string, seq: number | null = null): Promise<void> {
    const opened = await chat.open(id);
    if (!opened) return;
    layout.closeSidebar();
    if (seq !== null) chat.highlight(seq);
  }

  function newConversation(): void {
    if (phase?.phase() !== "ready") return;
    layout.closeSidebar();
    void chat.newConversation();
  }

  const sidebar = createSidebar({
    open: (id) => void openConversation(id),
    newConversation,
    activeId: () => chat.currentId(),
    onDeleted(_id, wasOpen) {
      if (wasOpen) chat.clear();
    },
    onRefreshed(items) {
      listed = items;
      const active = items.find((item) => item.id === chat.currentId());
      if (active) title.textContent = active.title.trim() || "Companion";
    },
  });

  const search = createSearch({
    openHit: (conversationId, seq) => void openConversation(conversationId, seq),
  });

  const settings = createSettingsPanel({ onReloading: () => phase?.reload("Applying the settings") });
  const modelPanel = createModelPanel({ onSwitching: () => phase?.reload("Loading the model") });

  const documents = createDocuments({
    async onDone(conversationId) {
      await sidebar.refresh();
      await openConversation(conversationId);
    },
    modelNotice: () => modelNotice,
    onPictures: (paths) => void chat.addDroppedPictures(paths),
    blocked() {
      const now = phase?.phase();
      if (now === "loading") return "Companion is still starting; try again once it is ready.";
      if (now === "failed") return "Companion has no working model yet; import or choose one first.";
      return null;
    },
  });

  phase = createPhaseController({
    async onReady() {
      try {
        call("get_settings")
          .then((s) => applyTheme(s.theme))
          .catch(() => undefined);
        const items = await sidebar.refresh();
        const current = chat.currentId();
        if (current && items.some((item) => item.id === current)) {
          await chat.open(current, true);
        } else {
          const recent = mostRecent(items);
          if (recent) await chat.open(recent.id);
          else chat.clear();
        }
        void statusLine.refresh();
        chat.focusComposer();
      } catch (error) {
        showError(error);
      }
    },
    onNotice: (text) => showNotice(text),
    openModelPanel: () => void modelPanel.open(),
    openSettings: () => void settings.open(),
  });

  required("#open-settings").addEventListener("click", () => void settings.open());
  required("#open-model").addEventListener("click", () => void modelPanel.open());
  const toolsPanel = createToolsPanel();
  required("#open-tools").addEventListener("click", () => void toolsPanel.open());

  installShortcuts({
    newConversation,
    focusSearch() {
      if (phase?.phase() !== "ready") return;
      if (!layout.isWide()) layout.openSidebar();
      search.focus();
    },
    openSettings: () => void settings.open(),
    escape() {
      if (closeTopModal()) return;
      if (layout.sidebarOverlayOpen()) {
        layout.closeSidebar();
        return;
      }
      if (chat.isStreaming()) void chat.stop();
    },
  });

  void documents.listenForDrops();
  statusLine.start();
  watchReminders(() => phase?.phase() === "ready");
  phase.start();
}

try {
  boot();
} catch (error) {
  fatal(error);
}
