// How a search hit's snippet reads: its segments as escaped HTML, the matching ones in <mark>.
// Pure functions (strings in, strings out).
import { escapeHtml } from "./dom";
import type { SearchHit, SearchSegment } from "./types";

export function segmentsToHtml(segments: readonly SearchSegment[]): string {
  return segments
    .map((segment) => (segment.hit ? `<mark>${escapeHtml(segment.text)}</mark>` : escapeHtml(segment.text)))
    .join("");
}

/** What the hit is, in words, for its label: "Title", "You", "Assistant". */
export function hitSource(hit: SearchHit): string {
  if (hit.seq === null || hit.role === null) return "Title";
  if (hit.role === "user") return "You";
  if (hit.role === "assistant") return "Assistant";
  return "System";
}
