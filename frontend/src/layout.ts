// The sidebar as a slide-over on narrow windows: #toggle-sidebar opens and closes it, the
// backdrop and Escape close it. On wide windows (above 760 px) it is always shown by CSS.
import { required } from "./dom";

export const WIDE_QUERY = "(min-width: 760px)";

export interface Layout {
  openSidebar(): void;
  closeSidebar(): void;
  /** True when the sidebar is a slide-over that is open now. */
  sidebarOverlayOpen(): boolean;
  isWide(): boolean;
}

export function createLayout(): Layout {
  const toggle = required<HTMLButtonElement>("#toggle-sidebar");
  const backdrop = required("#sidebar-backdrop");
  const wide = typeof window.matchMedia === "function" ? window.matchMedia(WIDE_QUERY) : null;

  function set(open: boolean): void {
    document.body.classList.toggle("sidebar-open", open);
    toggle.setAttribute("aria-expanded", String(open));
    toggle.setAttribute("aria-label", open ? "Hide the conversations" : "Show the conversations");
    backdrop.hidden = !open;
  }

  toggle.addEventListener("click", () => set(!document.body.classList.contains("sidebar-open")));
  backdrop.addEventListener("click", () => set(false));
  wide?.addEventListener?.("change", () => {
    if (wide.matches) set(false);
  });
  set(false);

  return {
    openSidebar: () => set(true),
    closeSidebar: () => set(false),
    sidebarOverlayOpen: () => document.body.classList.contains("sidebar-open") && !(wide?.matches ?? false),
    isWide: () => wide?.matches ?? true,
  };
}
