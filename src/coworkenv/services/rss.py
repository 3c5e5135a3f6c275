"""RSS: news articles grouped into feeds by source, and newsletter publishing. Claw-Eval compatible
(routes under ``/rss``, audit collection ``published``).

Claw-Eval tasks ship articles as ``articles.json`` or ``feeds.json`` (both are article lists); both
load into the one ``articles`` table. Feeds are derived from the articles' ``source``; a feed's id is
its source name lower-cased with runs of non-word characters replaced by ``-``, and
``rss_get_feed`` (absent from Claw-Eval's mock, though its tasks expose it) accepts the id or the
source name. Category filters match a whole category or one item of a comma-separated category.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

from pydantic import Field

from coworkenv.errors import ToolError
from coworkenv.services.service import Record, Service, TableDef, tool


class Article(Record):
    article_id: str
    title: str = ""
    source: str = ""
    category: str = ""
    published_at: str = ""
    summary: str = ""
    content: str = ""
    word_count: int | None = None
    url: str = ""
    tags: list[str] = Field(default_factory=list)


_SUMMARY = ("article_id", "title", "source", "category", "published_at", "summary", "word_count")


def _feed_id(source: str) -> str:
    return re.sub(r"[\W_]+", "-", source.strip().lower()).strip("-") or "feed"


def _category_matches(value: object, wanted: str) -> bool:
    want = wanted.strip().lower()
    text = str(value or "").lower()
    return want == text or want in [p.strip() for p in re.split(r"[,，;、]", text)]


def _summary(a: Mapping[str, Any]) -> dict[str, Any]:
    return {k: a.get(k) for k in _SUMMARY}


class Rss(Service):
    name = "rss"
    title = "RSS reader and newsletter"
    tables: ClassVar[Mapping[str, TableDef]] = {
        "articles": TableDef(Article, "article_id", "articles.json", aliases=("feeds.json",))
    }

    def _feeds(self, category: str | None = None) -> list[dict[str, Any]]:
        feeds: dict[str, dict[str, Any]] = {}
        for a in self.table("articles"):
            if category and not _category_matches(a.get("category"), category):
                continue
            src = str(a.get("source", ""))
            feed = feeds.setdefault(src, {"feed_id": _feed_id(src), "source": src, "categories": [],
                                          "article_count": 0})
            if a.get("category") not in feed["categories"]:
                feed["categories"].append(a.get("category"))
            feed["article_count"] += 1
        return list(feeds.values())

    @tool("/rss/feeds")
    def rss_list_feeds(
        self, category: Annotated[str | None, Field(description="Filter by category")] = None
    ) -> dict[str, Any]:
        """List RSS feeds (one per source) with their categories and article counts."""
        feeds = self._feeds(category)
        return {"feeds": feeds, "total": len(feeds)}

    @tool("/rss/feeds/get")
    def rss_get_feed(
        self, feed_id: Annotated[str, Field(description="Feed ID (or source name)", min_length=1)]
    ) -> dict[str, Any]:
        """Get a feed and its articles (summaries)."""
        want = feed_id.strip().lower()
        feed = next((f for f in self._feeds() if want in (f["feed_id"], f["source"].lower())), None)
        if feed is None:
            raise ToolError("not_found", f"Feed {feed_id} not found", status=404)
        articles = [_summary(a) for a in self.table("articles") if a.get("source") == feed["source"]]
        return {"feed": feed, "articles": articles, "total": len(articles)}

    @tool("/rss/articles")
    def rss_list_articles(
        self,
        source: Annotated[str | None, Field(description="Filter by source")] = None,
        category: Annotated[str | None, Field(description="Filter by category")] = None,
        max_results: Annotated[int, Field(description="Maximum number of results to return", ge=1)] = 20,
        feed_name: Annotated[str | None, Field(description="Filter by feed name (source) or feed ID")] = None,
    ) -> dict[str, Any]:
        """List articles (summaries), filtered by source/feed and category."""
        out = []
        for a in self.table("articles"):
            src = str(a.get("source", ""))
            if source and src.lower() != source.strip().lower():
                continue
            if feed_name and feed_name.strip().lower() not in (src.lower(), _feed_id(src)):
                continue
            if category and not _category_matches(a.get("category"), category):
                continue
            out.append(_summary(a))
            if len(out) >= max_results:
                break
        return {"articles": out, "total": len(out)}

    @tool("/rss/articles/get")
    def rss_get_article(self, article_id: Annotated[str, Field(description="Article ID")]) -> dict[str, Any]:
        """Get an article's full content."""
        return dict(self.table("articles").require(article_id, "Article"))

    @tool("/rss/publish", write=True, audit="published")
    def rss_publish(
        self,
        title: Annotated[str, Field(description="Newsletter title", min_length=1)],
        content: Annotated[str, Field(description="Newsletter content", min_length=1)],
        recipients: Annotated[list[str] | None, Field(description="List of recipients")] = None,
    ) -> dict[str, Any]:
        """Publish a newsletter."""
        record = {"title": title, "content": content, "recipients": list(recipients or []),
                  "timestamp": self.clock.now().isoformat()}
        self.emit("published", record)
        return {"status": "published", "record": record}
