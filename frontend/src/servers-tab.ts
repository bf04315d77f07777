// The Servers tab of the Tools panel: MCP servers whose tools the agent may use beside its own,
// each tool asked for like a write unless the server marks it read-only and its entry allows
// that ("allowReadOnlyTools": true). The list shows each server's state, its tools and what was
// left out; a server can be switched off and on; the configuration is the ecosystem's
// `mcpServers` JSON, edited here and checked before it is saved (`save_mcp_config`). Servers
// restart in the background: the tab polls `mcp_servers` until they are ready.
import { call } from "./api";
import { el } from "./dom";
import type { McpServerStatus, ServersView } from "./types";

/** How long the tab waits between looks while servers start. */
const POLL_MS = 400;

const STATE_LABEL: Record<McpServerStatus["state"], string> = {
  ready: "ready",
  failed: "failed",
  stopped: "stopped",
  disabled: "off",
};

/** One server's row: name, transport, state, why it failed, its tools, the on/off switch. */
export function serverRow(s: McpServerStatus, onToggle: (enabled: boolean) => void): HTMLElement {
  const enabled = el("input", {
    type: "checkbox",
    class: "server-enabled",
    checked: s.state !== "disabled",
    "aria-label": `Use the tools of ${s.name}`,
  });
  enabled.addEventListener("change", () => onToggle(enabled.checked));
  const tools = s.tools.length
    ? el(
        "details",
        { class: "server-tools" },
        el("summary", { text: `${s.tools.length} tool${s.tools.length === 1 ? "" : "s"}` }),
        el(
          "ul",
          null,
          ...s.tools.map((t) =>
            el(
              "li",
              { class: "server-tool", "data-tool": t.name },
              el("code", { text: t.name }),
              t.preApproved ? el("span", { class: "tag", text: "read-only, not asked" }) : el("span", { class: "tag", text: "asks first" }),
              t.description ? el("span", { class: "muted", text: ` ${t.description}` }) : null,
            ),
          ),
        ),
      )
    : null;
  return el(
    "li",
    { class: "server", "data-name": s.name, "data-state": s.state },
    el(
      "div",
      { class: "server-text" },
      el(
        "div",
        { class: "server-head" },
        el("strong", { class: "server-name", text: s.name }),
        el("span", { class: "muted", text: s.transport }),
        el("span", { class: `tag server-state${s.state === "failed" || s.state === "stopped" ? " error" : ""}`, text: STATE_LABEL[s.state] }),
      ),
      s.message ? el("p", { class: "server-message", text: s.message }) : null,
      ...s.notices.map((n) => el("p", { class: "muted server-notice", text: n })),
      tools,
    ),
    el("label", { class: "check" }, enabled, " on"),
  );
}

/** The tab's content; `rerender` shows the tab again (after a change, or while starting). */
export async function serversTab(rerender: () => void, fail: (error: unknown) => void): Promise<Node[]> {
  const view: ServersView = await call("mcp_servers");
  if (view.starting) setTimeout(rerender, POLL_MS);
  const editor = el("textarea", {
    id: "mcp-config",
    class: "mono",
    rows: 8,
    spellcheck: false,
    "aria-label": "MCP servers, as JSON",
  });
  editor.value = view.config;
  const save = el("button", { type: "button", id: "save-mcp-config", class: "primary", text: "Save and restart servers" });
  save.addEventListener("click", () => {
    save.disabled = true;
    call("save_mcp_config", { config: editor.value })
      .then(rerender)
      .catch(fail)
      .finally(() => (save.disabled = false));
  });
  const toggle = (name: string) => (enabled: boolean) => {
    call("set_mcp_server_enabled", { name, enabled }).then(rerender).catch(fail);
  };
  const nodes: (Node | null)[] = [
    el("p", {
      class: "panel-intro",
      text: "Tools of Model Context Protocol servers join Companion's own. Every call shows its arguments and asks you first, unless the server marks the tool read-only and its entry says \"allowReadOnlyTools\": true. A server's answers are data, never instructions.",
    }),
    view.stdioSupported
      ? null
      : el("p", {
          class: "notice",
          id: "mcp-ios-note",
          text: "On iPhone and iPad, apps cannot start programs: only servers with a \"url\" (Streamable HTTP) can run here.",
        }),
    view.error ? el("p", { class: "panel-error", role: "alert", text: view.error }) : null,
    view.starting ? el("p", { class: "muted", id: "mcp-starting", text: "Starting the servers…" }) : null,
    view.servers.length
      ? el("ul", { id: "server-list", class: "tools-list" }, ...view.servers.map((s) => serverRow(s, toggle(s.name))))
      : el("p", { class: "empty", text: "No MCP server is set up." }),
    el(
      "details",
      { class: "server-config", open: view.servers.length === 0 },
      el("summary", { text: "Servers (JSON)" }),
      el("p", {
        class: "muted",
        text: `{"mcpServers": {"name": {"command": "…", "args": […]} or {"url": "http://…"}}}, as Claude Desktop, Jan and LM Studio write it. Kept in ${view.configPath ?? "the app's data folder"}.`,
      }),
      editor,
      el("div", { class: "panel-foot" }, save),
    ),
  ];
  return nodes.filter((n): n is Node => n !== null);
}
