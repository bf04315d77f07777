// The colour theme: light, dark or the system's, as a data attribute on <html> that styles.css
// keys its variables on; remembered locally so the next start does not flash the wrong one.
import type { Theme } from "./types";

const KEY = "companion.theme";

export function applyTheme(theme: Theme): void {
  document.documentElement.dataset.theme = theme;
  try {
    localStorage.setItem(KEY, theme);
  } catch {
    // Storage can be unavailable; the theme still applies for this run.
  }
}

export function restoreTheme(): void {
  let theme: string | null = null;
  try {
    theme = localStorage.getItem(KEY);
  } catch {
    theme = null;
  }
  document.documentElement.dataset.theme =
    theme === "light" || theme === "dark" || theme === "system" ? theme : "system";
}
