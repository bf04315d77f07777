import { describe, expect, it } from "vitest";
import {
  asSentence,
  formatBytes,
  formatDuration,
  formatMegabytes,
  formatMs,
  formatParameters,
  formatTimeLeft,
  formatTokensPerSecond,
  withCode,
} from "../src/format";

describe("withCode", () => {
  it("puts the error's code after its sentence, once", () => {
    expect(withCode("The model could not be loaded.", "model_load_failed")).toBe(
      "The model could not be loaded. (code: model_load_failed)",
    );
    expect(withCode("Oops. (code: x)", "x")).toBe("Oops. (code: x)");
    expect(withCode("No code.", null)).toBe("No code.");
  });
});

describe("formatBytes", () => {
  it("picks the unit", () => {
    expect(formatBytes(0)).toBe("0 B");
    expect(formatBytes(512)).toBe("512 B");
    expect(formatBytes(1536)).toBe("1.5 KB");
    expect(formatBytes(253_113_024)).toBe("241 MB");
    expect(formatBytes(3 * 1024 ** 3)).toBe("3 GB");
  });
  it("shows a dash for missing values", () => {
    expect(formatBytes(null)).toBe("—");
    expect(formatBytes(Number.NaN)).toBe("—");
    expect(formatBytes(-1)).toBe("—");
  });
});

describe("formatMegabytes", () => {
  it("always uses MB", () => {
    expect(formatMegabytes(253_113_024)).toBe("241 MB");
    expect(formatMegabytes(5 * 1024 * 1024)).toBe("5 MB");
    expect(formatMegabytes(5.5 * 1024 * 1024)).toBe("5.5 MB");
    expect(formatMegabytes(3 * 1024 ** 3)).toBe("3,072 MB");
    expect(formatMegabytes(null)).toBe("—");
  });
});

describe("formatTokensPerSecond", () => {
  it("keeps one decimal below 10", () => {
    expect(formatTokensPerSecond(7.26)).toBe("7.3 tok/s");
    expect(formatTokensPerSecond(42.6)).toBe("43 tok/s");
    expect(formatTokensPerSecond(null)).toBe("—");
  });
});

describe("formatMs", () => {
  it("switches to seconds and minutes", () => {
    expect(formatMs(240.4)).toBe("240 ms");
    expect(formatMs(1234)).toBe("1.23 s");
    expect(formatMs(12_340)).toBe("12.3 s");
    expect(formatMs(125_000)).toBe("2 min 5 s");
    expect(formatMs(undefined)).toBe("—");
  });
});

describe("formatTimeLeft", () => {
  it("reads as words", () => {
    expect(formatTimeLeft(null)).toBe("Estimating the time left…");
    expect(formatTimeLeft(0.4)).toBe("Almost done");
    expect(formatTimeLeft(45)).toBe("About 45 s left");
    expect(formatTimeLeft(200)).toBe("About 3 min 20 s left");
    expect(formatTimeLeft(3900)).toBe("About 1 h 5 min left");
    expect(formatDuration(120)).toBe("2 min");
  });
});

describe("formatParameters", () => {
  it("counts in millions", () => {
    expect(formatParameters(268_098_176)).toBe("268 M");
    expect(formatParameters(3_500_000)).toBe("3.5 M");
    expect(formatParameters(999_885_952)).toBe("1,000 M");
  });
});

describe("asSentence", () => {
  it("capitalizes and ends with a full stop", () => {
    expect(asSentence("the model file is missing")).toBe("The model file is missing.");
    expect(asSentence("Already fine!")).toBe("Already fine!");
    expect(asSentence("  ")).toBe("Something went wrong.");
  });
});
