"""Documents: text extraction from task files, and a document store. Claw-Eval compatible for
``documents_extract_text`` (route ``/documents/extract_text``; Claw-Eval audits calls only).

Claw-Eval parses a real PDF from the task directory (T097, T098); a trial has no filesystem, so the
``files`` table (fixture ``files.json``: ``{path, pages: [page text, ...]}`` or ``{path, text}``)
holds each file's already-extracted text, keyed by its path relative to the task directory, and
extraction returns the first ``max_pages`` pages joined by blank lines. Paths escaping the task
directory are rejected. The ``documents`` table (``documents.json``: ``doc_id, title, content``)
backs ``documents_list`` / ``documents_get`` / ``documents_create`` (audit ``created_documents``).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

from pydantic import Field

from coworkenv.errors import invalid, not_found
from coworkenv.services.kb import score_fields, search_terms
from coworkenv.services.service import Record, Service, TableDef, tool


class SourceFile(Record):
    path: str
    pages: list[str] = Field(default_factory=list)
    text: str = ""


class Document(Record):
    doc_id: str
    title: str
    content: str = ""
    folder: str = ""
    author: str = ""
    created_at: str = ""
    tags: list[str] = Field(default_factory=list)


_SNIPPET = 150


def _normalize(path: str) -> str:
    raw = path.strip().replace("\\", "/")
    if not raw:
        raise invalid("path must not be empty")
    if raw.startswith("/"):
        raise invalid(f"path must be relative to the task workspace, got {path!r}")
    norm = posixpath.normpath(raw)
    if norm == ".." or norm.startswith("../"):
        raise invalid(f"path escapes the task workspace: {path!r}")
    return norm


class Documents(Service):
    name = "documents"
    title = "Documents"
    tables: ClassVar[Mapping[str, TableDef]] = {
        "files": TableDef(SourceFile, "path", "files.json"),
        "documents": TableDef(Document, "doc_id", "documents.json"),
    }

    @tool("/documents/extract_text")
    def documents_extract_text(
        self,
        path: Annotated[str, Field(description="Path of the file, relative to the task workspace")],
        max_pages: Annotated[int | None, Field(description="Maximum pages to extract", ge=1)] = None,
    ) -> dict[str, Any]:
        """Extract readable text from a (PDF) file in the task workspace."""
        norm = _normalize(path)
        files = self.table("files")
        rec = files.get(norm)
        if rec is None:
            rec = next((f for f in files if _normalize(str(f["path"])) == norm), None)
        if rec is None:
            raise not_found("File", path)
        pages = [str(p) for p in rec.get("pages", [])] or ([str(rec["text"])] if rec.get("text") else [])
        limit = min(max_pages or len(pages), len(pages))
        return {
            "path": norm,
            "page_count": len(pages),
            "pages_returned": limit,
            "text": "\n\n".join(pages[:limit]).strip(),
        }

    @tool("/documents/list")
    def documents_list(
        self,
        query: Annotated[str | None, Field(description="Keywords matched in title and content")] = None,
        folder: Annotated[str | None, Field(description="Folder filter")] = None,
        max_results: Annotated[int, Field(description="Maximum number of results", ge=1)] = 20,
    ) -> dict[str, Any]:
        """List documents (title, folder, snippet), optionally filtered by keywords and folder."""
        terms = search_terms(query) if query else []
        if query and not terms:
            raise invalid("query must contain at least one search term")
        scored: list[tuple[float, int, dict[str, Any]]] = []
        for i, d in enumerate(self.table("documents")):
            if folder and str(d.get("folder", "")).lower() != folder.strip().lower():
                continue
            content = str(d.get("content", ""))
            score = score_fields(terms, [(3, str(d.get("title", ""))), (1, content)]) if terms else 0.0
            if terms and score <= 0:
                continue
            scored.append((-score, i, {
                "doc_id": d["doc_id"],
                "title": d.get("title", ""),
                "folder": d.get("folder", ""),
                "created_at": d.get("created_at", ""),
                "snippet": content[:_SNIPPET] + ("..." if len(content) > _SNIPPET else ""),
            }))
        scored.sort(key=lambda t: (t[0], t[1]))
        out = [r for _, _, r in scored[:max_results]]
        return {"documents": out, "total": len(out)}

    @tool("/documents/get")
    def documents_get(self, doc_id: Annotated[str, Field(description="Document ID")]) -> dict[str, Any]:
        """Get a document's full content."""
        return dict(self.table("documents").require(doc_id, "Document"))

    @tool("/documents/create", write=True, audit="created_documents")
    def documents_create(
        self,
        title: Annotated[str, Field(description="Document title", min_length=1)],
        content: Annotated[str, Field(description="Document body (plain text or Markdown)", min_length=1)],
        folder: Annotated[str, Field(description="Folder")] = "",
        tags: Annotated[list[str] | None, Field(description="Tags")] = None,
    ) -> dict[str, Any]:
        """Create a new document."""
        if not title.strip():
            raise invalid("title must not be empty")
        docs = self.table("documents")
        n = len(docs) + 1
        while f"DOC-N{n:03d}" in docs:
            n += 1
        rec = {
            "doc_id": f"DOC-N{n:03d}",
            "title": title,
            "content": content,
            "folder": folder,
            "tags": list(tags or []),
            "author": "agent",
            "created_at": self.clock.now().isoformat(),
        }
        stored = dict(docs.put(rec))
        self.emit("created_documents", stored)
        return {"status": "created", "document": stored}
