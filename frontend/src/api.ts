// The typed bridge to the Rust side: `call` invokes a command of the contract in types.ts with
// its exact argument names, `channel` makes the stream a streaming command writes to, and
// `errorMessage` turns any rejection into a sentence to show, with the error's code (the same
// code is in the log, so a report that quotes the screen leads straight to the log line).
import { Channel, invoke, type InvokeArgs } from "@tauri-apps/api/core";
import type { AppError, Commands } from "./types";
import { asSentence, withCode } from "./format";

export { withCode };

export type Command = keyof Commands;
export type ArgsOf<K extends Command> = Commands[K]["args"];
export type ResultOf<K extends Command> = Commands[K]["result"];
type NoArgs = Record<string, never>;

/** Invokes `cmd`. Commands without arguments take none here. */
export function call<K extends Command>(
  cmd: K,
  ...args: ArgsOf<K> extends NoArgs ? [] : [ArgsOf<K>]
): Promise<ResultOf<K>> {
  return invoke<ResultOf<K>>(cmd, (args[0] ?? {}) as InvokeArgs);
}

/** A channel for a streaming command; `onEvent` receives every event in order. */
export function channel<T>(onEvent: (event: T) => void): Channel<T> {
  const ch = new Channel<T>();
  ch.onmessage = onEvent;
  return ch;
}

export function isAppError(value: unknown): value is AppError {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as AppError).message === "string" &&
    typeof (value as AppError).code === "string"
  );
}

/** The error's code when it is an AppError, else null. */
export function errorCode(error: unknown): string | null {
  return isAppError(error) ? error.code : null;
}

/** One sentence for anything a command or the page can throw, with the code of an AppError. */
export function errorMessage(error: unknown): string {
  return withCode(errorText(error), errorCode(error));
}

/** The sentence alone, for a view that shows the code itself (a chat error carries both). */
export function errorText(error: unknown): string {
  if (typeof error === "string") return asSentence(error);
  if (typeof error === "object" && error !== null) {
    const message = (error as { message?: unknown }).message;
    if (typeof message === "string" && message.trim()) return asSentence(message);
  }
  return "Something went wrong; try again.";
}
