// The status line at the bottom (#status-line): backend, speed and time to first token of the
// last reply, memory in use, thermal state (its message on hover). Polls `status` every 2 s and
// reports the backend's phase so a reload started elsewhere shows the loading view.
import { call } from "./api";
import { required } from "./dom";
import { formatMegabytes, formatMs, formatTokensPerSecond } from "./format";
import type { ReplyStats, StatusView, ThermalState } from "./types";

export const STATUS_POLL_MS = 2000;

const THERMAL_LABELS: Record<ThermalState, string> = {
  nominal: "Cool",
  fair: "Warm",
  serious: "Hot",
  critical: "Too hot",
  unknown: "Unknown",
};

export interface StatusLine {
  start(): void;
  refresh(): Promise<void>;
  showReply(stats: ReplyStats): void;
  showThermal(state: ThermalState, message: string | null): void;
}

/** `onStatus` gets every answer of `status` with `askedAt`, when it was asked for
 *  (performance.now()), so a caller can ignore an answer that left the backend before its own
 *  latest phase change. */
export function createStatusLine(onStatus: (status: StatusView, askedAt: number) => void): StatusLine {
  const backend = required("#status-backend");
  const speed = required("#status-speed");
  const ttft = required("#status-ttft");
  const memory = required("#status-memory");
  const thermal = required("#status-thermal");
  let started = false;

  function showReply(stats: ReplyStats | null): void {
    speed.textContent = formatTokensPerSecond(stats?.tokensPerSecond);
    ttft.textContent = stats ? `${formatMs(stats.timeToFirstTokenMs)} to first token` : "— to first token";
  }

  function showThermal(state: ThermalState, message: string | null): void {
    thermal.textContent = THERMAL_LABELS[state] ?? state;
    thermal.dataset.state = state;
    thermal.title = message ?? `Thermal state: ${state}`;
    thermal.setAttribute("aria-label", `Thermal state: ${THERMAL_LABELS[state] ?? state}${message ? `. ${message}` : ""}`);
  }

  function show(status: StatusView): void {
    backend.textContent = status.backend ? status.backend.toUpperCase() : "—";
    backend.title = status.backend ? `Running on ${status.backend}` : "No model is loaded";
    showReply(status.lastReply);
    memory.textContent = formatMegabytes(status.memoryBytes);
    memory.title = "Memory in use by Companion";
    showThermal(status.thermal, status.thermalMessage);
  }

  async function refresh(): Promise<void> {
    const askedAt = performance.now();
    try {
      const status = await call("status");
      show(status);
      onStatus(status, askedAt);
    } catch {
      // The status line is best effort; the next poll tries again.
    }
  }

  function tick(): void {
    void refresh().finally(() => {
      setTimeout(tick, STATUS_POLL_MS);
    });
  }

  showReply(null);
  return {
    start() {
      if (started) return;
      started = true;
      tick();
    },
    refresh,
    showReply,
    showThermal,
  };
}
