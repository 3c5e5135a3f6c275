"""Knowledge base: articles. Claw-Eval compatible (routes under ``/kb``, fixture ``articles.json``,
audit collection ``updates``).

Contract: ``kb_search`` scores each article by the query's terms (Latin words of two or more
characters minus a few stop words; CJK runs as character bigrams, so Chinese queries work without
spaces) found in the title (3 points), a tag (2) and the content (1); it returns the articles with a
positive score, best first (fixture order breaks ties), at most ``max_results``. The term helpers
here are shared by the other services' searches.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, ClassVar

from pydantic import Field

from coworkenv.errors import invalid
from coworkenv.services.service import Record, Service, TableDef, tool

_TOKEN = re.compile(r"[0-9a-z][0-9a-z_.@]*|[\u3400-\u9fff]+")
_STOP = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "by", "do", "does", "for", "from", "how", "i", "in", "is",
    "it", "me", "my", "of", "on", "or", "our", "the", "to", "what", "when", "where", "which", "who", "why",
    "with", "you", "your",
})


def search_terms(text: str) -> list[str]:
    """The distinct search terms of a query, in order (lowercase)."""
    out: list[str] = []
    for raw in _TOKEN.findall(text.lower()):
        tok = raw.strip("_.@")
        if not tok:
            continue
        if "\u3400" <= tok[0] <= "\u9fff":
            grams = [tok] if len(tok) <= 2 else [tok[i : i + 2] for i in range(len(tok) - 1)]
        elif len(tok) < 2 or tok in _STOP:
            continue
        else:
            grams = [tok]
        out.extend(g for g in grams if g not in out)
    return out


def score_fields(terms: Iterable[str], weighted: Iterable[tuple[float, str]]) -> float:
    """Sum of weights of the fields (lowercased text) each term occurs in."""
    fields = [(w, text.lower()) for w, text in weighted]
    return sum(w for term in terms for w, text in fields if term in text)


class Article(Record):
    article_id: str
    title: str = ""
    category: str = ""
    tags: list[str] = Field(default_factory=list)
    content: str = ""
    last_updated: str = ""
    views: int = 0


_SNIPPET = 150


class KnowledgeBase(Service):
    name = "kb"
    title = "Knowledge base"
    tables: ClassVar[Mapping[str, TableDef]] = {"articles": TableDef(Article, "article_id", "articles.json")}

    @tool("/kb/search")
    def kb_search(
        self,
        query: Annotated[str, Field(description="Search keywords")],
        category: Annotated[str | None, Field(description="Category filter")] = None,
        max_results: Annotated[int, Field(description="Maximum number of results", ge=1)] = 5,
    ) -> dict[str, Any]:
        """Search knowledge-base articles by keywords in title, tags and content."""
        terms = search_terms(query)
        if not terms:
            raise invalid("query must contain at least one search term")
        scored: list[tuple[float, int, dict[str, Any]]] = []
        for i, a in enumerate(self.table("articles")):
            if category and str(a.get("category", "")).lower() != category.strip().lower():
                continue
            score = score_fields(terms, [
                (3, str(a.get("title", ""))),
                (2, " ".join(a.get("tags", []))),
                (1, str(a.get("content", ""))),
            ])
            if score <= 0:
                continue
            content = str(a.get("content", ""))
            scored.append((-score, i, {
                "article_id": a["article_id"],
                "title": a.get("title", ""),
                "category": a.get("category", ""),
                "tags": list(a.get("tags", [])),
                "last_updated": a.get("last_updated", ""),
                "views": a.get("views", 0),
                "snippet": content[:_SNIPPET] + ("..." if len(content) > _SNIPPET else ""),
                "score": score,
            }))
        scored.sort(key=lambda t: (t[0], t[1]))
        out = [r for _, _, r in scored[:max_results]]
        return {"articles": out, "total": len(out)}

    @tool("/kb/articles/get")
    def kb_get_article(self, article_id: Annotated[str, Field(description="Article ID")]) -> dict[str, Any]:
        """Get the full content of a knowledge-base article."""
        return dict(self.table("articles").require(article_id, "Article"))

    @tool("/kb/articles/update", write=True, audit="updates")
    def kb_update_article(
        self,
        article_id: Annotated[str, Field(description="Article ID")],
        content: Annotated[str, Field(description="New article content (replaces the current content)")],
        title: Annotated[str | None, Field(description="New title")] = None,
        tags: Annotated[list[str] | None, Field(description="New tags (replace the current ones)")] = None,
    ) -> dict[str, Any]:
        """Update a knowledge-base article's content (and optionally title and tags)."""
        articles = self.table("articles")
        articles.require(article_id, "Article")
        if not content.strip():
            raise invalid("content must not be empty")
        if title is not None and not title.strip():
            raise invalid("title must not be empty")
        changes: dict[str, Any] = {"content": content, "last_updated": self.clock.today.isoformat()}
        if title is not None:
            changes["title"] = title
        if tags is not None:
            changes["tags"] = tags
        updated = dict(articles.update(article_id, **changes))
        self.emit("updates", {
            "article_id": article_id,
            "title": updated.get("title", ""),
            "content": content,
            "timestamp": self.clock.now().isoformat(),
        })
        return {"status": "updated", "article_id": article_id, "article": updated}
