// Start-up: app_state is polled every 200 ms while loading, the phase is mirrored on <body>,
// a failure shows its sentence and ways out, and notices are reported once.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { fakeBackend, loadPage } from "./page";

vi.mock("@tauri-apps/api/core", async () => {
  const { FakeChannel } = await import("./tauri-mock");
  return { invoke: vi.fn(), Channel: FakeChannel };
});

import { invoke } from "@tauri-apps/api/core";
import { createPhaseController, type PhaseHooks } from "../src/app-phase";
import type { AppState } from "../src/types";

const invokeMock = vi.mocked(invoke) as unknown as ReturnType<typeof vi.fn>;

describe("app phase", () => {
  let states: AppState[];
  let hooks: PhaseHooks;

  beforeEach(() => {
    vi.useFakeTimers();
    loadPage();
    hooks = { onReady: vi.fn(), onNotice: vi.fn(), openModelPanel: vi.fn(), openSettings: vi.fn() };
    fakeBackend(invokeMock, { app_state: () => states.shift() ?? states[0] });
  });

  afterEach(() => vi.useRealTimers());

  const loading = (stage: string, notices: string[] = []): AppState => ({ phase: "loading", stage, error: null, notices });

  it("polls while loading, then reports ready once", async () => {
    states = [
      loading("Opening the database", ["The database was damaged and set aside."]),
      loading("Loading the model", ["The database was damaged and set aside."]),
      { phase: "ready", stage: null, error: null, notices: ["The database was damaged and set aside."] },
    ];
    const phase = createPhaseController(hooks);
    phase.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(document.body.dataset.phase).toBe("loading");
    expect(document.querySelector("#loading-stage")?.textContent).toBe("Opening the database");
    await vi.advanceTimersByTimeAsync(200);
    expect(document.querySelector("#loading-stage")?.textContent).toBe("Loading the model");
    expect(hooks.onReady).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(200);
    expect(document.body.dataset.phase).toBe("ready");
    expect(document.querySelector<HTMLElement>("#phase-view")?.hidden).toBe(true);
    expect(hooks.onReady).toHaveBeenCalledTimes(1);
    expect(hooks.onNotice).toHaveBeenCalledTimes(1);
    expect(invokeMock).toHaveBeenCalledTimes(3);
    await vi.advanceTimersByTimeAsync(1000);
    expect(invokeMock).toHaveBeenCalledTimes(3);
  });

  it("shows a failure as a sentence with a way to a model and to settings", async () => {
    states = [{ phase: "failed", stage: null, error: { code: "no_model", message: "no model was found; import a GGUF file" }, notices: [] }];
    createPhaseController(hooks).start();
    await vi.advanceTimersByTimeAsync(0);
    expect(document.body.dataset.phase).toBe("failed");
    expect(document.querySelector("#failed-message")?.textContent).toBe("No model was found; import a GGUF file. (code: no_model)");
    document.querySelector<HTMLElement>("#failed-open-model")!.click();
    document.querySelector<HTMLElement>("#failed-open-settings")!.click();
    expect(hooks.openModelPanel).toHaveBeenCalled();
    expect(hooks.openSettings).toHaveBeenCalled();
  });
});
