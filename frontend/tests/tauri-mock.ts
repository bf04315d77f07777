// The mocked `@tauri-apps/api/core`: `invoke` is a vi.fn, `Channel` is a plain object whose
// `onmessage` the test calls to stream events. Use with vi.mock("@tauri-apps/api/core", ...).
export class FakeChannel<T = unknown> {
  id = Math.floor(Math.random() * 1e9);
  onmessage: (message: T) => void = () => undefined;
}
