// Test helpers: the app's real page (index.html) in jsdom, and a fake backend behind the mocked
// `invoke` that answers each command with a handler and records the calls.
import indexHtml from "../index.html?raw";
import { vi } from "vitest";
import type { Commands } from "../src/types";

/** Puts the body of index.html (without its script) into the document. */
export function loadPage(): void {
  const body = /<body[^>]*>([\s\S]*)<\/body>/.exec(indexHtml)?.[1] ?? "";
  document.body.innerHTML = body.replace(/<script[\s\S]*?<\/script>/g, "");
  document.body.dataset.phase = "ready";
  document.body.className = "";
}

type Handler<K extends keyof Commands> = (args: Commands[K]["args"]) => Commands[K]["result"] | Promise<Commands[K]["result"]>;
export type Handlers = { [K in keyof Commands]?: Handler<K> };

export interface FakeBackend {
  calls: { cmd: string; args: Record<string, unknown> }[];
  callsOf(cmd: keyof Commands): Record<string, unknown>[];
}

/** Routes the mocked `invoke` to `handlers`; an unknown command rejects like the Rust side. */
export function fakeBackend(invokeMock: ReturnType<typeof vi.fn>, handlers: Handlers): FakeBackend {
  const calls: FakeBackend["calls"] = [];
  invokeMock.mockImplementation(async (cmd: string, args: Record<string, unknown> = {}) => {
    calls.push({ cmd, args });
    const handler = (handlers as Record<string, ((a: unknown) => unknown) | undefined>)[cmd];
    if (!handler) throw { code: "unknown_command", message: `The command ${cmd} is not available.` };
    return handler(args);
  });
  return {
    calls,
    callsOf: (cmd) => calls.filter((c) => c.cmd === cmd).map((c) => c.args),
  };
}

/** Lets pending promises and a couple of timers run. */
export async function settle(ms = 0): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, ms));
  await Promise.resolve();
}

export function press(target: Element, key: string, init: KeyboardEventInit = {}): KeyboardEvent {
  const event = new KeyboardEvent("keydown", { key, bubbles: true, cancelable: true, ...init });
  target.dispatchEvent(event);
  return event;
}

export function typeInto(input: HTMLInputElement | HTMLTextAreaElement, value: string): void {
  input.value = value;
  input.dispatchEvent(new Event("input", { bubbles: true }));
}
