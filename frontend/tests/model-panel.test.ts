// The model panel's labels: a model of the library by name and version, any other file by its
// name; the import's progress as a percentage of the file.
import { describe, expect, it } from "vitest";
import { importProgressText, modelLabel } from "../src/model-panel";

const file = { path: "/m/a.gguf", fileName: "a.gguf", bytes: 1, current: false, name: null, version: null, sha256: null };

describe("the model panel", () => {
  it("names a library model by name and version, another file by its name", () => {
    expect(modelLabel({ ...file, name: "Gemma 3 270m", version: 2, sha256: "ab" })).toBe("Gemma 3 270m v2");
    expect(modelLabel(file)).toBe("a.gguf");
  });

  it("shows an import's progress in percent of the file", () => {
    expect(importProgressText({ done: 126_556_512, total: 253_113_024 })).toContain("50%");
    expect(importProgressText({ done: 0, total: 0 })).toContain("100%");
  });
});
