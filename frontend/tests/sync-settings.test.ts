import { describe, expect, it } from "vitest";
import { agoText, syncLine } from "../src/sync-settings";
import type { SyncView } from "../src/types";

const view = (over: Partial<SyncView>): SyncView => ({
  folder: "/Users/me/Library/Mobile Documents/com~apple~CloudDocs/Companion",
  device: "0123456789abcdef",
  syncing: false,
  lastRoundAt: 1_000_000,
  lastOutcome: "Sent 2 change(s).",
  lastError: null,
  unsent: 0,
  waiting: 0,
  devices: 1,
  ...over,
});

describe("the sync section's line", () => {
  it("says it is off without a folder", () => {
    expect(syncLine(view({ folder: null }), 0)).toMatch(/^Off\./);
  });
  it("says when and what, and how many devices", () => {
    expect(syncLine(view({}), 1_000_000 + 120_000)).toBe("Last synced 2 min ago. Sent 2 change(s). 1 other device seen.");
    expect(syncLine(view({ devices: 0 }), 1_000_000)).toContain("No other device");
  });
  it("leaves the outcome to the error line when the round had problems", () => {
    expect(syncLine(view({ lastError: "skipped a damaged file" }), 1_000_000)).not.toContain("Sent");
  });
  it("counts the changes waiting for a parent", () => {
    expect(syncLine(view({ waiting: 3 }), 1_000_000)).toContain("3 change(s) wait");
  });
  it("says syncing while a round runs", () => {
    expect(syncLine(view({ syncing: true }), 0)).toBe("Syncing…");
  });
});

describe("agoText", () => {
  it("grows its unit", () => {
    expect(agoText(0, 5_000)).toBe("just now");
    expect(agoText(0, 45_000)).toBe("45 s ago");
    expect(agoText(0, 3 * 3600_000)).toBe("3 h ago");
    expect(agoText(0, 3 * 86400_000)).toBe("3 days ago");
  });
});
