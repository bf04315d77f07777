// Searching the conversations from the box at the top of the sidebar (#search): debounced
// `search_conversations`, results as `.search-result` (title, then the snippet with hits in
// <mark>); choosing one opens its conversation at that message.
import { call, errorMessage } from "./api";
import { debounce } from "./debounce";
import { el, required } from "./dom";
import { hitSource, segmentsToHtml } from "./search-render";
import type { SearchHit } from "./types";

export const SEARCH_DEBOUNCE_MS = 200;

export interface SearchHooks {
  openHit(conversationId: string, seq: number | null): void;
}

export interface SearchBox {
  focus(): void;
  clear(): void;
}

export function hitNode(hit: SearchHit): HTMLLIElement {
  const snippet = el("span", { class: "search-result-snippet" });
  snippet.innerHTML = segmentsToHtml(hit.segments);
  return el(
    "li",
    null,
    el(
      "button",
      {
        type: "button",
        class: "search-result",
        "data-conversation-id": hit.conversationId,
        "data-seq": hit.seq ?? null,
      },
      el(
        "span",
        { class: "search-result-head" },
        el("span", { class: "search-result-title", text: hit.conversationTitle || "New conversation" }),
        el("span", { class: "search-result-source", text: hitSource(hit) }),
      ),
      snippet,
    ),
  );
}

export function createSearch(hooks: SearchHooks): SearchBox {
  const input = required<HTMLInputElement>("#search");
  const results = required("#search-results");
  const list = required("#conversation-list");
  let token = 0;

  function showList(): void {
    token++;
    results.hidden = true;
    results.replaceChildren();
    list.hidden = false;
  }

  async function run(query: string): Promise<void> {
    const mine = ++token;
    let hits: SearchHit[];
    try {
      hits = await call("search_conversations", { query });
    } catch (error) {
      if (mine !== token) return;
      results.replaceChildren(
        el("li", { class: "search-empty", role: "alert", text: errorMessage(error) }),
      );
      results.hidden = false;
      list.hidden = true;
      return;
    }
    if (mine !== token) return;
    results.replaceChildren(
      ...(hits.length
        ? hits.map(hitNode)
        : [el("li", { class: "search-empty", text: `No conversation matches “${query}”.` })]),
    );
    results.hidden = false;
    list.hidden = true;
  }

  const search = debounce((query: string) => void run(query), SEARCH_DEBOUNCE_MS);

  input.addEventListener("input", () => {
    const query = input.value.trim();
    if (!query) {
      search.cancel();
      showList();
      return;
    }
    search(query);
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && input.value) {
      event.preventDefault();
      event.stopPropagation();
      input.value = "";
      search.cancel();
      showList();
    } else if (event.key === "ArrowDown") {
      const first = results.querySelector<HTMLElement>(".search-result");
      if (first && !results.hidden) {
        event.preventDefault();
        first.focus();
      }
    } else if (event.key === "Enter") {
      search.flush();
    }
  });
  results.addEventListener("click", (event) => {
    const button = (event.target as Element).closest<HTMLElement>(".search-result");
    if (!button) return;
    const seq = button.dataset.seq;
    hooks.openHit(button.dataset.conversationId ?? "", seq === undefined ? null : Number(seq));
  });

  return {
    focus() {
      input.focus();
      input.select();
    },
    clear() {
      input.value = "";
      search.cancel();
      showList();
    },
  };
}
