// The Servers tab against a fake backend: each server's state, reason and tools; the on/off
// switch and the editor's save reach the right commands; iOS says only URL servers run there.
import { describe, expect, it, vi } from "vitest";

vi.mock("@tauri-apps/api/core", async () => {
  const { FakeChannel } = await import("./tauri-mock");
  return { invoke: vi.fn(), Channel: FakeChannel };
});

import { invoke } from "@tauri-apps/api/core";
import { serverRow, serversTab } from "../src/servers-tab";
import type { McpServerStatus, ServersView } from "../src/types";

const invokeMock = vi.mocked(invoke) as unknown as ReturnType<typeof vi.fn>;

function status(over: Partial<McpServerStatus> = {}): McpServerStatus {
  return {
    name: "files",
    transport: "stdio",
    state: "ready",
    message: null,
    tools: [
      { name: "files/read_text_file", description: "Reads a file", preApproved: true },
      { name: "files/write_file", description: "Writes a file", preApproved: false },
    ],
    notices: [],
    allowReadOnlyTools: true,
    ...over,
  };
}

function view(over: Partial<ServersView> = {}): ServersView {
  return {
    configPath: "/data/mcp.json",
    config: '{"mcpServers": {}}',
    starting: false,
    error: null,
    servers: [status()],
    stdioSupported: true,
    ...over,
  };
}

describe("the Servers tab", () => {
  it("shows a server's state, its tools and which of them ask first", () => {
    const toggled: boolean[] = [];
    const row = serverRow(status(), (on) => toggled.push(on));
    expect(row.dataset.state).toBe("ready");
    const tools = [...row.querySelectorAll<HTMLElement>(".server-tool")];
    expect(tools.map((t) => t.dataset.tool)).toEqual(["files/read_text_file", "files/write_file"]);
    expect(tools[0].textContent).toContain("read-only, not asked");
    expect(tools[1].textContent).toContain("asks first");
    const on = row.querySelector<HTMLInputElement>(".server-enabled")!;
    expect(on.checked).toBe(true);
    on.checked = false;
    on.dispatchEvent(new Event("change"));
    expect(toggled).toEqual([false]);
  });

  it("says why a server failed", () => {
    const row = serverRow(status({ state: "failed", message: "cannot run `nodex`", tools: [] }), () => {});
    expect(row.querySelector(".server-state")!.classList.contains("error")).toBe(true);
    expect(row.querySelector(".server-message")!.textContent).toBe("cannot run `nodex`");
  });

  it("saves the editor's text and switches servers through their commands", async () => {
    invokeMock.mockReset();
    invokeMock.mockResolvedValue(view());
    const rerender = vi.fn();
    const nodes = await serversTab(rerender, () => {});
    const root = document.createElement("div");
    root.append(...nodes);
    const editor = root.querySelector<HTMLTextAreaElement>("#mcp-config")!;
    expect(editor.value).toBe('{"mcpServers": {}}');
    editor.value = '{"mcpServers": {"a": {"url": "http://127.0.0.1:1/mcp"}}}';
    root.querySelector<HTMLButtonElement>("#save-mcp-config")!.click();
    await vi.waitFor(() => expect(rerender).toHaveBeenCalled());
    expect(invokeMock).toHaveBeenCalledWith("save_mcp_config", { config: editor.value });
    const on = root.querySelector<HTMLInputElement>(".server-enabled")!;
    on.checked = false;
    on.dispatchEvent(new Event("change"));
    await vi.waitFor(() => expect(invokeMock).toHaveBeenCalledWith("set_mcp_server_enabled", { name: "files", enabled: false }));
    expect(root.querySelector("#mcp-ios-note")).toBeNull();
  });

  it("tells iOS users that only servers with a url run there", async () => {
    invokeMock.mockReset();
    invokeMock.mockResolvedValue(view({ stdioSupported: false, servers: [] }));
    const root = document.createElement("div");
    root.append(...(await serversTab(() => {}, () => {})));
    expect(root.querySelector("#mcp-ios-note")!.textContent).toContain('"url"');
    expect(root.querySelector(".empty")!.textContent).toContain("No MCP server");
  });
});
