// The settings panel (#settings-panel, saved with #settings-save): every field of `Settings`,
// read with `get_settings`, written with `set_settings`; the theme applies at once, and when the
// engine reloads to apply them the app goes back to the loading view.
import { call, errorMessage } from "./api";
import { showNotice } from "./banner";
import { el, required } from "./dom";
import { closeModal, initModal, openModal } from "./modal";
import { copyText } from "./clipboard";
import {
  DEVICE_CHOICES,
  NUMBER_FIELDS,
  SPECULATION_CHOICES,
  THEME_CHOICES,
  apiStatusLine,
  crossFieldProblem,
  parseNumberField,
  type NumberField,
} from "./settings-fields";
import { createSyncSection } from "./sync-settings";
import { applyTheme } from "./theme";
import type { ApiStatus, Device, Settings, Speculation, Theme } from "./types";

export interface SettingsHooks {
  /** The engine reloads to apply the settings. */
  onReloading(): void;
}

export interface SettingsPanel {
  open(): Promise<void>;
  close(): void;
}

function numberInput(field: NumberField): HTMLElement {
  const id = `setting-${field.key}`;
  return el(
    "div",
    { class: "field" },
    el("label", { for: id, text: field.label }),
    el("input", {
      id,
      name: field.key,
      type: "number",
      inputmode: field.integer ? "numeric" : "decimal",
      min: field.min,
      max: field.max,
      step: field.step,
      required: true,
    }),
    field.hint ? el("p", { class: "hint", text: field.hint }) : null,
  );
}

function selectInput(id: string, label: string, choices: readonly { value: string; label: string }[]): HTMLElement {
  return el(
    "div",
    { class: "field" },
    el("label", { for: id, text: label }),
    el("select", { id, name: id }, ...choices.map((c) => el("option", { value: c.value, text: c.label }))),
  );
}

function fieldsFor(keys: readonly string[]): HTMLElement[] {
  return NUMBER_FIELDS.filter((f) => keys.includes(f.key)).map(numberInput);
}

export function createSettingsPanel(hooks: SettingsHooks): SettingsPanel {
  const panel = required("#settings-panel");
  const errorLine = el("p", { class: "panel-error", role: "alert", hidden: true });
  const save = el("button", { type: "submit", id: "settings-save", class: "primary", text: "Save" });
  const cancel = el("button", { type: "button", class: "panel-cancel", text: "Cancel" });
  const closeButton = el("button", { type: "button", class: "close", "aria-label": "Close the settings", title: "Close" });
  const prompt = el("textarea", { id: "setting-systemPrompt", name: "systemPrompt", rows: 4 });
  const openLogs = el("button", { type: "button", id: "open-log-folder", text: "Open log folder" });
  const logPath = el("p", { class: "hint", id: "log-folder-path" });
  const apiEnabled = el("input", { id: "setting-apiEnabled", name: "apiEnabled", type: "checkbox" }) as HTMLInputElement;
  const apiLine = el("p", { class: "hint", id: "api-status", role: "status" });
  const copyToken = el("button", { type: "button", id: "api-copy-token", text: "Copy token", hidden: true });
  let apiToken: string | null = null;
  const sync = createSyncSection();
  const form = el(
    "form",
    { class: "modal-card", novalidate: true },
    el("header", { class: "panel-head" }, el("h2", { id: "settings-heading", text: "Settings" }), closeButton),
    el(
      "div",
      { class: "panel-body" },
      el("fieldset", null, el("legend", { text: "Appearance" }), selectInput("setting-theme", "Theme", THEME_CHOICES)),
      el(
        "fieldset",
        null,
        el("legend", { text: "Replies" }),
        el(
          "div",
          { class: "field wide" },
          el("label", { for: "setting-systemPrompt", text: "System prompt" }),
          prompt,
          el("p", { class: "hint", text: "Instructions the assistant follows in every conversation." }),
        ),
        ...fieldsFor(["temperature", "topP", "topK", "repetitionPenalty", "maxTokens"]),
        selectInput("setting-speculation", "Speculative decoding", SPECULATION_CHOICES),
      ),
      el(
        "fieldset",
        null,
        el("legend", { text: "Engine" }),
        selectInput("setting-device", "Device", DEVICE_CHOICES),
        ...fieldsFor(["contextSize", "threads"]),
      ),
      el("fieldset", null, el("legend", { text: "Heat" }), ...fieldsFor(["fairRate", "seriousRate"])),
      el(
        "fieldset",
        null,
        el("legend", { text: "Local API" }),
        el(
          "div",
          { class: "field wide" },
          el("label", { for: "setting-apiEnabled" }, apiEnabled, " Let programs on this computer use the model"),
          el("p", {
            class: "hint",
            text: "An OpenAI-compatible server for your editor and scripts, with a token. Nothing they send is saved unless they ask.",
          }),
        ),
        ...fieldsFor(["apiPort"]),
        el("div", { class: "field wide" }, apiLine, copyToken),
      ),
      sync.element,
      el(
        "fieldset",
        null,
        el("legend", { text: "Problems" }),
        el(
          "div",
          { class: "field wide" },
          openLogs,
          el("p", {
            class: "hint",
            text: "The log holds what went wrong (never your conversations); send its files with a problem report.",
          }),
          logPath,
        ),
      ),
      errorLine,
    ),
    el("footer", { class: "panel-foot" }, cancel, save),
  );
  panel.replaceChildren(form);
  initModal(panel);

  let loaded: Settings | null = null;

  function input<T extends HTMLElement = HTMLInputElement>(id: string): T {
    return required<T>(`#${id}`, form);
  }

  function setLoading(loading: boolean): void {
    panel.dataset.state = loading ? "loading" : "ready";
    form.setAttribute("aria-busy", String(loading));
    for (const fieldset of form.querySelectorAll("fieldset")) fieldset.disabled = loading;
    save.disabled = loading;
  }

  function showProblem(message: string | null): void {
    errorLine.textContent = message ?? "";
    errorLine.hidden = message === null;
  }

  function fill(settings: Settings): void {
    for (const field of NUMBER_FIELDS) input(`setting-${field.key}`).value = String(settings[field.key]);
    input<HTMLSelectElement>("setting-device").value = settings.device;
    input<HTMLSelectElement>("setting-theme").value = settings.theme;
    input<HTMLSelectElement>("setting-speculation").value = settings.speculation;
    prompt.value = settings.systemPrompt;
    apiEnabled.checked = settings.apiEnabled;
  }

  function showApi(status: ApiStatus): void {
    apiLine.textContent = apiStatusLine(status);
    apiToken = status.token;
    copyToken.hidden = apiToken === null;
  }

  async function refreshApi(): Promise<void> {
    try {
      showApi(await call("api_status"));
    } catch (error) {
      apiLine.textContent = errorMessage(error);
    }
  }

  function read(): Settings | string {
    if (!loaded) return "The settings have not loaded yet; close the panel and open it again.";
    // Spread first: fields this form does not show (the backend's modelPath) go back unchanged.
    const next: Settings = { ...loaded };
    for (const field of NUMBER_FIELDS) {
      const value = parseNumberField(field, input(`setting-${field.key}`).value);
      if (typeof value !== "number") return value.error;
      next[field.key] = value;
    }
    next.device = input<HTMLSelectElement>("setting-device").value as Device;
    next.theme = input<HTMLSelectElement>("setting-theme").value as Theme;
    next.speculation = input<HTMLSelectElement>("setting-speculation").value as Speculation;
    next.systemPrompt = prompt.value;
    next.apiEnabled = apiEnabled.checked;
    return crossFieldProblem(next) ?? next;
  }

  async function submit(): Promise<void> {
    const settings = read();
    if (typeof settings === "string") {
      showProblem(settings);
      return;
    }
    showProblem(null);
    save.disabled = true;
    try {
      const applied = await call("set_settings", { settings });
      loaded = applied.settings;
      applyTheme(applied.settings.theme);
      closeModal(panel);
      if (applied.reloading) hooks.onReloading();
      else showNotice("Settings saved.", { timeoutMs: 4000, key: "settings" });
    } catch (error) {
      showProblem(errorMessage(error));
      void refreshApi();
    } finally {
      save.disabled = false;
    }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    void submit();
  });
  openLogs.addEventListener("click", () => {
    void (async () => {
      try {
        logPath.textContent = await call("open_log_folder");
      } catch (error) {
        showProblem(errorMessage(error));
      }
    })();
  });
  copyToken.addEventListener("click", () => {
    if (apiToken === null) return;
    void copyText(apiToken).then((ok) =>
      showNotice(ok ? "Token copied." : "The token could not be copied.", { timeoutMs: 3000, key: "api-token" }),
    );
  });
  cancel.addEventListener("click", () => closeModal(panel));
  closeButton.addEventListener("click", () => closeModal(panel));


  return {
    async open() {
      showProblem(null);
      // The values in force come from the backend (get_settings), one IPC round trip after the
      // panel shows. Until they are in, the form says it is loading and takes no input, so
      // nobody sees (or saves) empty fields; the panel's data-state tells tests when it is
      // filled.
      setLoading(true);
      if (loaded) fill(loaded);
      // the sync section follows the background rounds while the panel is open
      openModal(panel, () => sync.stop());
      sync.start();
      void call("log_folder").then(
        (path) => (logPath.textContent = path),
        () => undefined,
      );
      try {
        loaded = await call("get_settings");
        fill(loaded);
        setLoading(false);
        await refreshApi();
      } catch (error) {
        loaded = null;
        panel.dataset.state = "failed";
        showProblem(errorMessage(error));
      }
    },
    close: () => closeModal(panel),
  };
}
