import { describe, expect, it } from "vitest";
import { baseName, progressText } from "../src/documents";
import { NUMBER_FIELDS, apiStatusLine, crossFieldProblem, parseNumberField } from "../src/settings-fields";
import { shortcutOf } from "../src/shortcuts";

const field = (key: string) => NUMBER_FIELDS.find((f) => f.key === key)!;

describe("parseNumberField", () => {
  it("accepts numbers in range and explains the rest in a sentence", () => {
    expect(parseNumberField(field("temperature"), "0.7")).toBe(0.7);
    expect(parseNumberField(field("temperature"), "")).toEqual({ error: "Temperature needs a number." });
    expect(parseNumberField(field("temperature"), "3")).toEqual({ error: "Temperature must be between 0 and 2." });
    expect(parseNumberField(field("threads"), "2.5")).toEqual({ error: "Compute threads needs a whole number." });
  });

  it("refuses a hot speed above the warm one", () => {
    expect(crossFieldProblem({ fairRate: 0.7, seriousRate: 0.4 })).toBeNull();
    expect(crossFieldProblem({ fairRate: 0.4, seriousRate: 0.7 })).toBe("Speed when hot must be at most the speed when warm.");
  });

  it("covers every number of Settings", () => {
    expect(NUMBER_FIELDS.map((f) => f.key).sort()).toEqual(
      ["apiPort", "contextSize", "fairRate", "maxTokens", "repetitionPenalty", "seriousRate", "temperature", "threads", "topK", "topP"].sort(),
    );
  });
});

describe("apiStatusLine", () => {
  const off = { running: false, url: null, token: null, tokenFile: "/d/api-token", problem: null };
  it("says where the API listens, why it does not, or that it is off", () => {
    expect(apiStatusLine({ ...off, running: true, url: "http://127.0.0.1:7878/v1", token: "t" })).toContain("http://127.0.0.1:7878/v1");
    expect(apiStatusLine({ ...off, problem: "port taken" })).toBe("port taken");
    expect(apiStatusLine(off)).toMatch(/^Off\./);
  });
});

describe("progressText", () => {
  it("says done / total, time left and paused", () => {
    const text = progressText({ level: 1, done: 3, total: 12, reused: 0, elapsedSeconds: 30, remainingSeconds: 95, paused: true });
    expect(text).toEqual({
      count: "3 / 12 summaries",
      time: "About 1 min 35 s left",
      paused: "Paused while the device cools down.",
      fraction: 0.25,
    });
    expect(progressText({ level: 0, done: 0, total: 0, reused: 0, elapsedSeconds: 0, remainingSeconds: null, paused: false }).fraction).toBe(0);
  });

  it("names a dropped file by its last path part", () => {
    expect(baseName("/home/me/notes/report.pdf")).toBe("report.pdf");
    expect(baseName("C:\\Users\\me\\a.txt")).toBe("a.txt");
  });
});

describe("shortcutOf", () => {
  const key = (k: string, mods: Partial<KeyboardEvent> = {}) =>
    shortcutOf({ key: k, ctrlKey: false, metaKey: false, altKey: false, shiftKey: false, ...mods });
  it("maps the window shortcuts", () => {
    expect(key("n", { ctrlKey: true })).toBe("new");
    expect(key("N", { metaKey: true })).toBe("new");
    expect(key("k", { ctrlKey: true })).toBe("search");
    expect(key(",", { metaKey: true })).toBe("settings");
    expect(key("Escape")).toBe("escape");
    expect(key("n")).toBeNull();
    expect(key("k", { ctrlKey: true, altKey: true })).toBeNull();
  });
});
