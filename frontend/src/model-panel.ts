// The model panel (#model-panel): what the loaded model is (`model_info`), the models on this
// device (`list_models`: the library's versions, then other GGUF files) with "Use" to switch
// (`switch_model`: a self-check, then the loading view), and "Import GGUF…" (`import_model`,
// with its progress while the file is hashed and copied).
import { call, channel, errorMessage } from "./api";
import { el, required } from "./dom";
import { formatBytes, formatCount, formatMegabytes, formatMs, formatParameters } from "./format";
import { closeModal, initModal, openModal } from "./modal";
import type { ImportProgress, ModelFile, ModelView } from "./types";

export interface ModelPanelHooks {
  /** The engine is reloading with another model. */
  onSwitching(): void;
}

export interface ModelPanel {
  open(): Promise<void>;
  close(): void;
}

export function modelDetails(model: ModelView): [string, string][] {
  return [
    ["Name", model.name ?? model.fileName],
    ["File", model.fileName],
    ["Architecture", `${model.family} (${model.architecture})`],
    ["Kind", model.tuning === "base" ? "Base model (continues text)" : "Instruction-tuned (answers)"],
    ["Layers", model.layout],
    ["Parameters", formatParameters(model.parameters)],
    ["Quantization", model.quantization],
    ["Size", formatMegabytes(model.fileBytes)],
    ["SHA-256", model.sha256],
    ["Context", `${formatCount(model.context)} tokens`],
    ["Device", `${model.device} (${model.backend === "host" ? "Companion's kernels" : "candle"})`],
    ["Memory estimate", formatMegabytes(model.memoryEstimateBytes)],
    ["KV cache per token", formatBytes(model.kvBytesPerToken)],
    ["Load time", formatMs(model.loadSeconds * 1000)],
  ];
}

/** "Gemma 3 270m v2" for a model of the library, the file's name for any other. */
export function modelLabel(file: ModelFile): string {
  return file.name && file.version !== null ? `${file.name} v${file.version}` : file.fileName;
}

export function importProgressText(p: ImportProgress): string {
  const percent = p.total > 0 ? Math.floor((p.done * 100) / p.total) : 100;
  return `Checking and copying… ${percent}% (${formatMegabytes(p.done)} of ${formatMegabytes(p.total)})`;
}

export function createModelPanel(hooks: ModelPanelHooks): ModelPanel {
  const panel = required("#model-panel");
  const details = el("dl", { id: "model-details", class: "details" });
  const tuningNotice = el("p", { id: "model-tuning-notice", class: "model-notice", role: "note", hidden: true });
  const files = el("ul", { id: "model-list", class: "model-list" });
  const importButton = el("button", { type: "button", id: "import-model", class: "primary", text: "Import GGUF…" });
  const message = el("p", { class: "panel-message", role: "status", hidden: true });
  const errorLine = el("p", { class: "panel-error", role: "alert", hidden: true });
  const closeButton = el("button", { type: "button", class: "close", "aria-label": "Close the model panel", title: "Close" });
  panel.replaceChildren(
    el(
      "div",
      { class: "modal-card" },
      el("header", { class: "panel-head" }, el("h2", { id: "model-heading", text: "Model" }), closeButton),
      el(
        "div",
        { class: "panel-body" },
        el("section", null, el("h3", { text: "In use" }), details, tuningNotice),
        el("section", null, el("h3", { text: "Models on this device" }), files, el("div", { class: "panel-row" }, importButton)),
        message,
        errorLine,
      ),
    ),
  );
  initModal(panel);

  // Both lines sit below the list: one clicked far down must still be seen, so a line that
  // appears is scrolled into view (jsdom, in the unit tests, has no scrollIntoView).
  function say(text: string | null): void {
    message.textContent = text ?? "";
    message.hidden = text === null;
    if (text !== null) message.scrollIntoView?.({ block: "nearest" });
  }

  function problem(text: string | null): void {
    errorLine.textContent = text ?? "";
    errorLine.hidden = text === null;
    if (text !== null) errorLine.scrollIntoView?.({ block: "nearest" });
  }

  function showDetails(model: ModelView | null): void {
    tuningNotice.textContent = model?.tuningNotice ?? "";
    tuningNotice.hidden = !model?.tuningNotice;
    if (!model) {
      details.replaceChildren(el("p", { class: "muted", text: "No model is loaded." }));
      return;
    }
    details.replaceChildren(
      ...modelDetails(model).flatMap(([term, value]) => [
        el("dt", { text: term }),
        el("dd", { class: term === "SHA-256" ? "mono" : null, text: value }),
      ]),
    );
  }

  function fileNode(file: ModelFile): HTMLLIElement {
    return el(
      "li",
      { class: `model-file${file.current ? " current" : ""}`, "data-path": file.path },
      el(
        "span",
        { class: "model-name", title: file.path },
        el("span", { text: modelLabel(file) }),
        file.name ? el("span", { class: "model-file-name", text: file.fileName }) : null,
      ),
      file.sha256 ? el("span", { class: "model-sha mono", text: file.sha256.slice(0, 12), title: file.sha256 }) : null,
      el("span", { class: "model-size", text: formatMegabytes(file.bytes) }),
      file.current
        ? el("span", { class: "tag", text: "In use" })
        : el("button", { type: "button", class: "use-model", text: "Use", "aria-label": `Use ${modelLabel(file)}` }),
    );
  }

  function showFiles(list: ModelFile[]): void {
    files.replaceChildren(
      ...(list.length ? list.map(fileNode) : [el("li", { class: "muted", text: "No models yet; import a GGUF file." })]),
    );
  }

  async function load(): Promise<void> {
    const [info, list] = await Promise.allSettled([call("model_info"), call("list_models")]);
    if (info.status === "fulfilled") showDetails(info.value);
    else {
      showDetails(null);
      problem(errorMessage(info.reason));
    }
    if (list.status === "fulfilled") showFiles(list.value);
    else problem(errorMessage(list.reason));
  }

  async function switchTo(path: string): Promise<void> {
    problem(null);
    say("Checking the model…");
    try {
      await call("switch_model", { path });
      say(null);
      closeModal(panel);
      hooks.onSwitching();
    } catch (error) {
      say(null);
      problem(errorMessage(error));
    }
  }

  async function importModel(): Promise<void> {
    problem(null);
    say(null);
    importButton.disabled = true;
    try {
      const onProgress = channel<ImportProgress>((p) => say(importProgressText(p)));
      const file = await call("import_model", { onProgress });
      if (file) {
        say(`Imported ${modelLabel(file)}. Choose “Use” to switch to it.`);
        showFiles(await call("list_models"));
      }
    } catch (error) {
      problem(errorMessage(error));
    } finally {
      importButton.disabled = false;
    }
  }

  files.addEventListener("click", (event) => {
    const button = (event.target as Element).closest(".use-model");
    const path = button?.closest<HTMLElement>(".model-file")?.dataset.path;
    if (path) void switchTo(path);
  });
  importButton.addEventListener("click", () => void importModel());
  closeButton.addEventListener("click", () => closeModal(panel));

  return {
    async open() {
      say(null);
      problem(null);
      details.replaceChildren(el("p", { class: "muted", text: "Loading…" }));
      files.replaceChildren();
      openModal(panel);
      await load();
    },
    close: () => closeModal(panel),
  };
}
