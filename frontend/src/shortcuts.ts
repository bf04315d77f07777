// Keyboard shortcuts of the whole window: Ctrl/Cmd+N new conversation, Ctrl/Cmd+K search,
// Ctrl/Cmd+, settings, Escape closes the top panel, else the slide-over, else stops a reply.
// Inputs that use Escape themselves (rename, edit, search) stop it before it gets here.

export interface ShortcutActions {
  newConversation(): void;
  focusSearch(): void;
  openSettings(): void;
  /** Handles Escape; returns nothing. */
  escape(): void;
}

export type Shortcut = "new" | "search" | "settings" | "escape" | null;

/** Which shortcut a key press is (pure, for tests). */
export function shortcutOf(event: Pick<KeyboardEvent, "key" | "ctrlKey" | "metaKey" | "altKey" | "shiftKey">): Shortcut {
  if (event.key === "Escape") return "escape";
  const mod = (event.ctrlKey || event.metaKey) && !event.altKey;
  if (!mod) return null;
  const key = event.key.toLowerCase();
  if (key === "n" && !event.shiftKey) return "new";
  if (key === "k") return "search";
  if (key === ",") return "settings";
  return null;
}

export function installShortcuts(actions: ShortcutActions): void {
  window.addEventListener("keydown", (event) => {
    if (event.defaultPrevented || event.isComposing) return;
    const shortcut = shortcutOf(event);
    if (!shortcut) return;
    event.preventDefault();
    if (shortcut === "new") actions.newConversation();
    else if (shortcut === "search") actions.focusSearch();
    else if (shortcut === "settings") actions.openSettings();
    else actions.escape();
  });
}
