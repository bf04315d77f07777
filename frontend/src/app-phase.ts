// The app's phase (loading / ready / failed): polls `app_state` every 200 ms while loading,
// mirrors the phase on <body data-phase>, shows the loading stage or the failure with its way
// out (import a model, open settings), and reports each arrival at "ready" and every notice once.
import { call, errorMessage, withCode } from "./api";
import { el, required } from "./dom";
import { asSentence } from "./format";
import type { AppState, Phase } from "./types";

export const POLL_MS = 200;

export interface PhaseHooks {
  onReady(): void | Promise<void>;
  onNotice(text: string): void;
  openModelPanel(): void;
  openSettings(): void;
}

export interface PhaseController {
  /** Polls until the app is ready or failed. */
  start(): void;
  /** The engine is reloading (model switch, settings): show loading and poll again. */
  reload(stage?: string): void;
  phase(): Phase;
  /** performance.now() at the last change of phase. */
  changedAt(): number;
}

export function createPhaseController(hooks: PhaseHooks): PhaseController {
  const view = required("#phase-view");
  let phase: Phase = "loading";
  let changedAt = performance.now();
  let run = 0;
  const seenNotices = new Set<string>();

  function setPhase(next: Phase): void {
    if (next !== phase) changedAt = performance.now();
    phase = next;
    document.body.dataset.phase = next;
    view.hidden = next === "ready";
  }

  function showLoading(stage: string | null): void {
    const existing = view.querySelector("#loading-stage");
    if (existing) {
      existing.textContent = stage ?? "Starting…";
      return;
    }
    view.replaceChildren(
      el(
        "div",
        { class: "phase-card", role: "status", "aria-live": "polite" },
        el("div", { class: "spinner", "aria-hidden": "true" }),
        el("h2", { text: "Starting Companion" }),
        el("p", { id: "loading-stage", text: stage ?? "Starting…" }),
      ),
    );
  }

  function showFailed(message: string): void {
    const importButton = el("button", { type: "button", id: "failed-open-model", class: "primary", text: "Import or choose a model…" });
    const settingsButton = el("button", { type: "button", id: "failed-open-settings", text: "Open settings" });
    const retryButton = el("button", { type: "button", id: "failed-retry", text: "Try again" });
    importButton.addEventListener("click", () => hooks.openModelPanel());
    settingsButton.addEventListener("click", () => hooks.openSettings());
    retryButton.addEventListener("click", () => controller.reload());
    view.replaceChildren(
      el(
        "div",
        { class: "phase-card failed", role: "alert" },
        el("h2", { text: "Companion could not start" }),
        el("p", { id: "failed-message", text: message }),
        el("div", { class: "phase-actions" }, importButton, settingsButton, retryButton),
      ),
    );
  }

  async function poll(token: number): Promise<void> {
    let state: AppState;
    try {
      state = await call("app_state");
    } catch (error) {
      if (token !== run) return;
      setPhase("failed");
      showFailed(errorMessage(error));
      return;
    }
    if (token !== run) return;
    for (const notice of state.notices ?? []) {
      if (seenNotices.has(notice)) continue;
      seenNotices.add(notice);
      hooks.onNotice(notice);
    }
    if (state.phase === "loading") {
      setPhase("loading");
      showLoading(state.stage);
      setTimeout(() => void poll(token), POLL_MS);
    } else if (state.phase === "failed") {
      setPhase("failed");
      showFailed(
        state.error ? withCode(asSentence(state.error.message), state.error.code) : "Companion could not start; choose a model or check the settings.",
      );
    } else {
      const wasReady = phase === "ready";
      setPhase("ready");
      view.replaceChildren();
      if (!wasReady) await hooks.onReady();
    }
  }

  const controller: PhaseController = {
    start() {
      const token = ++run;
      void poll(token);
    },
    reload(stage) {
      const token = ++run;
      setPhase("loading");
      view.replaceChildren();
      showLoading(stage ?? "Loading the model");
      void poll(token);
    },
    phase: () => phase,
    changedAt: () => changedAt,
  };

  setPhase("loading");
  showLoading(null);
  return controller;
}
