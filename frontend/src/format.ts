// Formatting numbers and messages for people: byte sizes, speeds, durations, time left,
// parameter counts, and turning any error text into a sentence. Pure functions.

const KIB = 1024;
const MIB = KIB * 1024;
const GIB = MIB * 1024;

function fixed(value: number, digits: number): string {
  return value.toFixed(digits).replace(/\.0+$/, "");
}

export function formatBytes(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined || !Number.isFinite(bytes) || bytes < 0) return "—";
  if (bytes < KIB) return `${Math.round(bytes)} B`;
  if (bytes < MIB) return `${fixed(bytes / KIB, bytes < 10 * KIB ? 1 : 0)} KB`;
  if (bytes < GIB) return `${fixed(bytes / MIB, bytes < 10 * MIB ? 1 : 0)} MB`;
  return `${fixed(bytes / GIB, 2)} GB`;
}

/** Always in megabytes, as the status line and the model panel show sizes. */
export function formatMegabytes(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined || !Number.isFinite(bytes) || bytes < 0) return "—";
  const mb = bytes / MIB;
  return `${mb < 10 ? fixed(mb, 1) : Math.round(mb).toLocaleString("en-US")} MB`;
}

export function formatTokensPerSecond(rate: number | null | undefined): string {
  if (rate === null || rate === undefined || !Number.isFinite(rate) || rate < 0) return "—";
  return `${rate < 10 ? rate.toFixed(1) : Math.round(rate)} tok/s`;
}

export function formatMs(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms) || ms < 0) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${fixed(ms / 1000, ms < 10_000 ? 2 : 1)} s`;
  return formatDuration(ms / 1000);
}

/** 45 s, 3 min 20 s, 1 h 5 min. */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  const minutes = Math.floor(s / 60);
  if (minutes < 60) {
    const rest = s % 60;
    return rest ? `${minutes} min ${rest} s` : `${minutes} min`;
  }
  const hours = Math.floor(minutes / 60);
  const restMin = minutes % 60;
  return restMin ? `${hours} h ${restMin} min` : `${hours} h`;
}

export function formatTimeLeft(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds) || seconds < 0) {
    return "Estimating the time left…";
  }
  if (seconds < 1) return "Almost done";
  return `About ${formatDuration(seconds)} left`;
}

/** Parameters in millions: 268 M, 1,000 M, 3.5 M. */
export function formatParameters(count: number | null | undefined): string {
  if (count === null || count === undefined || !Number.isFinite(count) || count < 0) return "—";
  const millions = count / 1e6;
  return `${millions < 10 ? fixed(millions, 1) : Math.round(millions).toLocaleString("en-US")} M`;
}

export function formatCount(n: number): string {
  return Math.round(n).toLocaleString("en-US");
}

/** Starts with a capital and ends with a full stop (or other closing punctuation). */
export function asSentence(text: string): string {
  const trimmed = text.trim();
  if (!trimmed) return "Something went wrong.";
  const first = trimmed[0].toUpperCase() + trimmed.slice(1);
  return /[.!?…。！？)]$/.test(first) ? first : `${first}.`;
}

/** `message` followed by the error's code, as the user sees every error from the Rust side
 *  (the same code is in the log). */
export function withCode(message: string, code: string | null | undefined): string {
  if (!code || code === "error" || message.includes(`(code: ${code})`)) return message;
  return `${message} (code: ${code})`;
}
