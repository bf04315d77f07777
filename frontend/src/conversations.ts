// The order of the conversation list (pinned first, then most recently updated) and the choice
// of the conversation to open at start. Pure functions.
import type { ConversationItem } from "./types";

export function compareConversations(a: ConversationItem, b: ConversationItem): number {
  if (a.pinned !== b.pinned) return a.pinned ? -1 : 1;
  if (a.updatedAt !== b.updatedAt) return b.updatedAt - a.updatedAt;
  if (a.createdAt !== b.createdAt) return b.createdAt - a.createdAt;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

export function sortConversations(items: readonly ConversationItem[]): ConversationItem[] {
  return [...items].sort(compareConversations);
}

/** The conversation the user touched last, pinned or not; null when there is none. */
export function mostRecent(items: readonly ConversationItem[]): ConversationItem | null {
  let best: ConversationItem | null = null;
  for (const item of items) {
    if (!best || item.updatedAt > best.updatedAt) best = item;
  }
  return best;
}
