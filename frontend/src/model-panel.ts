// The model panel (#model-panel): what the loaded model is (`model_info`), the models on this
// device (`list_models`: the library's versions, then other GGUF files) with "Use" to switch
// (`switch_model`: a self-check, then the loading view), "Verify" (`verify_model`: hash the
// file again and compare with its import) and "Remove" (`remove_model`, after the in-app
// confirmation; not for the model in use) on the library's models, and "Import GGUF…"
// (`import_model`, with its progress while the file is hashed and copied).
import { call, channel, errorMessage } from "./api";
import { confirmAction } from "./confirm";
import { el, required } from "./dom";
import { formatBytes, formatCount, formatMegabytes, formatMs, formatParameters } from "./format";
import { closeModal, initModal, openModal } from "./modal";
import type { ImportProgress, ModelFile, ModelView, Verification } from "./types";

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
    ["Assistant", model.assistant ?? "None (drafts for speculation come from the conversation)"],
    [
      "Pictures",
      model.readsPictures && model.projector
        ? model.projector
        : "None: import the model's vision projector (an mmproj file) for it to read pictures",
    ],
  ];
}

/** "Gemma 3 270m v2" for a model of the library, the file's name for any other. */
export function modelLabel(file: ModelFile): string {
  return file.name && file.version !== null ? `${file.name} v${file.version}` : file.fileName;
}

function percentOf(p: ImportProgress): number {
  return p.total > 0 ? Math.floor((p.done * 100) / p.total) : 100;
}

export function importProgressText(p: ImportProgress): string {
  return `Checking and copying… ${percentOf(p)}% (${formatMegabytes(p.done)} of ${formatMegabytes(p.total)})`;
}

export function verifyProgressText(p: ImportProgress): string {
  return `Verifying… ${percentOf(p)}% (${formatMegabytes(p.done)} of ${formatMegabytes(p.total)})`;
}

/** What a verification found, in one sentence: the fingerprints when they differ. */
export function verificationText(v: Verification): string {
  return v.matches
    ? `${v.label} is intact: its SHA-256 is still ${v.expected.slice(0, 12)}….`
    : `${v.label} is damaged: its SHA-256 is now ${v.found.slice(0, 12)}… where it was ${v.expected.slice(0, 12)}… when imported. Import the file again, or remove it.`;
}

/** A model of the library (the only ones that can be verified or removed). */
function inLibrary(file: ModelFile): boolean {
  return file.sha256 !== null && file.version !== null;
}

export function createModelPanel(hooks: ModelPanelHooks): ModelPanel {
  const panel = required("#model-panel");
  const details = el("dl", { id: "model-details", class: "details" });
  const tuningNotice = el("p", { id: "model-tuning-notice", class: "model-notice", role: "note", hidden: true });
  const files = el("ul", { id: "model-list", class: "model-list" });
  const importButton = el("button", {
    type: "button",
    id: "import-model",
    class: "primary",
    text: "Import GGUF…",
    title: "A model, or a file paired with one: its Gemma 4 assistant or its vision projector (mmproj)",
  });
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
  /** The files the list shows, to find the one a button's row stands for. */
  let shown: ModelFile[] = [];

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
      inLibrary(file)
        ? el("button", { type: "button", class: "verify-model", text: "Verify", "aria-label": `Verify ${modelLabel(file)}` })
        : null,
      inLibrary(file) && !file.current
        ? el("button", { type: "button", class: "remove-model", text: "Remove", "aria-label": `Remove ${modelLabel(file)}` })
        : null,
    );
  }

  function showFiles(list: ModelFile[]): void {
    shown = list;
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
      if (file?.pairedAssistant) {
        say(
          `Paired ${modelLabel(file)} with its Gemma 4 assistant` +
            (file.current ? "; it drafts for the model from now on." : "; it drafts once you use the model."),
        );
        showFiles(await call("list_models"));
      } else if (file?.pairedProjector) {
        say(
          `Paired ${modelLabel(file)} with its vision projector` +
            (file.current
              ? "; it is loading, and the model reads pictures from then on."
              : "; the model reads pictures once you use it."),
        );
        showFiles(await call("list_models"));
      } else if (file) {
        say(`Imported ${modelLabel(file)}. Choose “Use” to switch to it.`);
        showFiles(await call("list_models"));
      }
    } catch (error) {
      problem(errorMessage(error));
    } finally {
      importButton.disabled = false;
    }
  }

  async function verify(path: string, button: HTMLButtonElement): Promise<void> {
    problem(null);
    say("Verifying…");
    button.disabled = true;
    try {
      const onProgress = channel<ImportProgress>((p) => say(verifyProgressText(p)));
      const found = await call("verify_model", { path, onProgress });
      if (found.matches) say(verificationText(found));
      else {
        say(null);
        problem(verificationText(found));
      }
    } catch (error) {
      say(null);
      problem(errorMessage(error));
    } finally {
      button.disabled = false;
    }
  }

  async function remove(file: ModelFile): Promise<void> {
    problem(null);
    say(null);
    const ok = await confirmAction({
      title: `Remove ${modelLabel(file)}?`,
      message:
        "It leaves the model library, and the copy the library made is deleted (a file you keep elsewhere stays). Conversations held with it stay; the model in use reads them again when they are opened.",
      confirmLabel: "Remove",
    });
    if (!ok) return;
    try {
      const removed = await call("remove_model", { path: file.path });
      say(
        removed.fileDeleted
          ? `Removed ${modelLabel(file)} and its file.`
          : `Removed ${modelLabel(file)} from the library; its file stays at ${file.path}.`,
      );
      showFiles(await call("list_models"));
    } catch (error) {
      problem(errorMessage(error));
    }
  }

  files.addEventListener("click", (event) => {
    const target = event.target as Element;
    const row = target.closest<HTMLElement>(".model-file");
    const file = shown.find((f) => f.path === row?.dataset.path);
    if (!file) return;
    if (target.closest(".use-model")) void switchTo(file.path);
    else if (target.closest(".verify-model")) void verify(file.path, target.closest<HTMLButtonElement>(".verify-model")!);
    else if (target.closest(".remove-model")) void remove(file);
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
