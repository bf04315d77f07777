// The fields of the settings form — label, bounds and step of each number, the choices of each
// select — and the check of what the user typed (one sentence per problem). Pure data and functions.
import type { ApiStatus, Device, Settings, Speculation, Theme } from "./types";

export type NumberKey = { [K in keyof Settings]-?: Settings[K] extends number ? K : never }[keyof Settings];

export interface NumberField {
  key: NumberKey;
  label: string;
  min: number;
  max: number;
  step: number;
  integer: boolean;
  hint?: string;
}

export const NUMBER_FIELDS: readonly NumberField[] = [
  { key: "temperature", label: "Temperature", min: 0, max: 2, step: 0.05, integer: false, hint: "0 always picks the likeliest word; higher gives more varied replies." },
  { key: "topP", label: "Top-p", min: 0.01, max: 1, step: 0.01, integer: false, hint: "Keeps the likeliest words that together reach this probability." },
  { key: "topK", label: "Top-k", min: 0, max: 1000, step: 1, integer: true, hint: "Keeps only this many likeliest words; 0 turns it off." },
  { key: "repetitionPenalty", label: "Repetition penalty", min: 1, max: 2, step: 0.01, integer: false, hint: "Above 1 discourages repeating recent words; 1 turns it off." },
  { key: "maxTokens", label: "Longest reply (tokens)", min: 1, max: 8192, step: 1, integer: true },
  { key: "contextSize", label: "Context size (tokens)", min: 256, max: 131072, step: 256, integer: true, hint: "How much of the conversation the model sees at once; more takes more memory. Changing it reloads the model." },
  { key: "threads", label: "Compute threads", min: 1, max: 256, step: 1, integer: true, hint: "Changing it reloads the model." },
  { key: "fairRate", label: "Speed when warm", min: 0.1, max: 1, step: 0.05, integer: false, hint: "Fraction of full speed while the device is warm." },
  { key: "seriousRate", label: "Speed when hot", min: 0.1, max: 1, step: 0.05, integer: false, hint: "Fraction of full speed while the device is hot." },
  { key: "apiPort", label: "Local API port", min: 1024, max: 65535, step: 1, integer: true, hint: "On 127.0.0.1 only: programs on this computer, never the network." },
];

/** One line on the local API: where it listens, or why it does not. */
export function apiStatusLine(status: ApiStatus): string {
  if (status.running && status.url) return `Listening on ${status.url}. Programs need the token (Copy token), kept in ${status.tokenFile}.`;
  if (status.problem) return status.problem;
  return "Off. Switch it on to let programs on this computer use the model (OpenAI-compatible).";
}

export const DEVICE_CHOICES: readonly { value: Device; label: string }[] = [
  { value: "cpu", label: "CPU" },
  { value: "cuda", label: "NVIDIA GPU (CUDA)" },
  { value: "metal", label: "Apple GPU (Metal)" },
];

export const SPECULATION_CHOICES: readonly { value: Speculation; label: string }[] = [
  {
    value: "auto",
    label: "On: drafts from the model's assistant when it has one, else from the conversation (same replies)",
  },
  { value: "lookup", label: "Drafts from the conversation (same replies)" },
  { value: "mtp", label: "Drafts from the model's Gemma 4 assistant (import it into Models)" },
  { value: "off", label: "Off: one token at a time" },
];

export const THEME_CHOICES: readonly { value: Theme; label: string }[] = [
  { value: "system", label: "Same as the system" },
  { value: "light", label: "Light" },
  { value: "dark", label: "Dark" },
];

/** What is wrong across fields (the hot speed above the warm one), or null. */
export function crossFieldProblem(values: { fairRate: number; seriousRate: number }): string | null {
  return values.seriousRate > values.fairRate
    ? "Speed when hot must be at most the speed when warm."
    : null;
}

/** The number typed into a field, or a sentence saying what is wrong with it. */
export function parseNumberField(field: NumberField, raw: string): number | { error: string } {
  const text = raw.trim();
  const value = Number(text);
  if (!text || !Number.isFinite(value)) return { error: `${field.label} needs a number.` };
  if (field.integer && !Number.isInteger(value)) return { error: `${field.label} needs a whole number.` };
  if (value < field.min || value > field.max) {
    return { error: `${field.label} must be between ${field.min} and ${field.max}.` };
  }
  return value;
}
