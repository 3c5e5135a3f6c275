"""Reading a slot's free-text scenario into parts, and saying which parts a built task honours.

A coverage plan's scenario is the task its author wants ("tickets open for more than 72 hours ...
email the backup; distractor: a ticket open 70 hours"). The offline generator builds from blocks
that can express some of it; this module makes the difference visible instead of silent.

Contract:

* :func:`read_scenario` maps ``(text, services)`` to a tuple of :class:`Part` — deterministic,
  no model: what the task selects (``select``: the record noun and its service), the conditions
  that select it (``condition``: age, upcoming, recent, amount, status, owner, with a threshold
  when one is written, and the kinds no block expresses yet: duplicates within a window, a
  person's absence, a missing match, a tier), the services joined for evidence (``join``), the
  writes (``write``: service, action, and ``draft`` when the scenario says not to send), the
  distractor (``distractor``: the condition it misses, when one is named) and what is forbidden
  (``forbid``). ``template:`` and ``compose:`` scenarios read as no parts (they pin the structure).
* :func:`judge_recipe` and :func:`judge_template` give each part a :class:`Verdict` —
  ``honoured`` (the built task does it), ``approximated`` (it does something close, said how) or
  ``ignored`` (it does not, said why) — against a composed recipe or a template's declared reading
  (its ``summary`` read by the same reader). :func:`fidelity` sums verdicts for a choice between
  builders; :func:`report` is the JSON ``run.json`` records per slot.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from coworkenv.synth.procedural.compose.recipe import Recipe
    from coworkenv.synth.procedural.templates import Template

PartKind = Literal["select", "condition", "join", "write", "distractor", "forbid"]
Status = Literal["honoured", "approximated", "ignored"]

NOUNS: tuple[tuple[str, str], ...] = (
    ("ticket", "helpdesk"),
    ("invoice", "finance"),
    ("payment", "finance"),
    ("charge", "finance"),
    ("refund", "finance"),
    ("bank detail", "finance"),
    ("vendor", "finance"),
    ("transaction", "finance"),
    ("expense", "finance"),
    ("subscription", "finance"),
    ("integration", "config"),
    ("credential", "config"),
    ("job", "scheduler"),
    ("backup", "scheduler"),
    ("article", "kb"),
    ("customer", "crm"),
    ("account", "crm"),
    ("stock", "inventory"),
    ("product", "inventory"),
    ("item", "inventory"),
    ("feed", "rss"),
    ("news", "rss"),
)
"""Nouns of records a request selects (what follows "find ..."), strongest evidence of the anchor."""
WEAK_NOUNS: tuple[tuple[str, str], ...] = (
    ("todo", "todo"),
    ("to-do", "todo"),
    ("meeting", "calendar"),
    ("event", "calendar"),
    ("email", "gmail"),
    ("message", "gmail"),
    ("note", "notes"),
    ("document", "documents"),
)
"""Nouns that are as often the *output* of a task (an email, a todo) as the records it selects."""
CONDS: tuple[tuple[str, str], ...] = (
    (
        r"\bolder\b|(?:more than|over|at least|less than|under) \d+ (?:day|hour|week)|overdue|stale"
        r"|last verified|not updated|not run|open for|\bopen \d+ (?:hour|day)|\d+ (?:hours|days) old",
        "age",
    ),
    (r"\bwithin the next\b|\bupcoming\b|\btomorrow\b|\bnext \d+ days\b|\bdue (?:in|within)\b", "upcoming"),
    (r"\blast \d+ days\b|\brecent|\bthis week\b|\blast week\b", "recent"),
    (r"\$\s?\d|\bUSD\b|\babove\b|\bamount\b|\brevenue\b|\bbelow\b|\bthreshold\b|\blow[- ]stock\b", "amount"),
    (r"\bcritical\b|\bfailed\b|\bfailing\b|\bat[ -]risk\b|\berror\b|\bpriority\b|\bstatus\b", "status"),
    (r"\bowned by\b|\bassigned to\b|\bowner\b|\bdeparted\b|\borganized by\b", "owner"),
)
"""Selection conditions a composed anchor can express (the kinds in ``ANCHORS[...].conds``)."""
UNSUPPORTED_CONDS: tuple[tuple[str, str, str], ...] = (
    (
        r"\bduplicate|\bdouble charge|\bsame (?:amount|customer|invoice)\b.{0,40}\bwithin\b|\btwice\b",
        "duplicate",
        "records repeating within a window (duplicates)",
    ),
    (
        r"\bon leave\b|\bout of (?:the )?office\b|\bon vacation\b|\babsent\b|\bunavailable\b|\bOOO\b",
        "absence",
        "a person's absence (from the calendar)",
    ),
    (
        r"\bno matching\b|\bwithout (?:a |any )?matching\b|\bhas no\b|\bhave no\b|\bmissing\b",
        "no_match",
        "a record with no matching record elsewhere",
    ),
    (r"\btier\b|\benterprise\b|\bpremium\b|\bgold\b", "tier", "a customer tier"),
    (r"\brecurring\b|\bmonthly\b|\bsubscription\b", "recurring", "a recurring pattern"),
)
"""Condition kinds no anchor block expresses: (pattern, kind, what it means)."""
SERVICE_WORDS: tuple[tuple[str, str], ...] = (
    (r"\bcrm\b", "crm"),
    (r"\bcontacts?\b|\bdirectory\b|\baddress book\b", "contacts"),
    (r"\bcalendar\b|\bschedule\b(?! a)", "calendar"),
    (r"\bknowledge[- ]base\b|\bkb\b", "kb"),
    (r"\bnotes?\b", "notes"),
    (r"\bdocuments?\b|\bpolicy\b|\bdocs?\b", "documents"),
    (r"\bhelpdesk\b|\btickets?\b", "helpdesk"),
    (r"\bfinance\b|\bledger\b|\binvoices?\b|\bcharges?\b|\btransactions?\b", "finance"),
    (r"\bscheduler\b|\bjobs?\b", "scheduler"),
    (r"\bconfig\b|\bintegrations?\b", "config"),
    (r"\binventory\b|\bstock\b", "inventory"),
    (r"\brss\b|\bfeeds?\b", "rss"),
    (r"\bgmail\b|\binbox\b|\bemails?\b", "gmail"),
    (r"\btodos?\b|\bto-dos?\b|\btask list\b", "todo"),
)
"""How a scenario names a service as a source of evidence."""
WRITE_VERBS: tuple[tuple[str, str, str], ...] = (
    (r"\bdraft\b", "gmail", "draft"),
    (
        r"\bemail\b|\be-mail\b|\bnotify\b|\bremind\b|\bsend\b|\breply\b|\binform\b|\bwrite to\b",
        "gmail",
        "send",
    ),
    (r"\btodos?\b|\bto-dos?\b|\bfollow-up (?:task|to-?do)\b", "todo", "create"),
    (
        r"\bopen (?:a |new |a new )tickets?\b|\b(?:file|create|raise) (?:a )?tickets?\b|\bticket it\b",
        "helpdesk",
        "create",
    ),
    (r"\breassign\w*|\bassign (?:it|them|each)\b", "@anchor", "reassign"),
    (r"\btag(?:s|ged)?\b|\blabel\w*|\bmark (?:it|them|each) as\b", "@anchor", "tag"),
    (r"\bclose\b|\bresolve\b", "@anchor", "close"),
    (r"\bmeeting\b|\bbook\b|\bset up a call\b|\binvite\b", "calendar", "create"),
    (r"\bdisable\b|\bpause\b|\bsuspend\b", "@anchor", "disable"),
    (r"\breport\b", "finance", "report"),
    (r"\brefund\b", "finance", "refund"),
    (r"\blog\b|\brecord (?:it|a note)\b|\bnote (?:it|on)\b|\bupdate the (?:account|crm)\b", "crm", "note"),
    (r"\bmessage\b|\bping\b", "contacts", "send"),
    (r"\bpublish\b|\bnewsletter\b", "rss", "publish"),
    (r"\bcompile\b|\bwrite (?:a|the) (?:document|summary|digest)\b", "documents", "create"),
    (r"\brestock\b|\border\b", "inventory", "order"),
    (r"\bupdate\b|\bcorrect\b|\bmove\b|\bset\b|\bescalate\b|\btriage\b", "@anchor", "update"),
)
"""Write verbs: (pattern, service, action); ``@anchor`` acts on the selected records themselves."""
STRONG = frozenset({"gmail", "todo", "helpdesk", "calendar"})
"""Services whose write verbs are read even when the slot lacks the service (then reported)."""
FORBID = re.compile(
    r"\b(?:do not|don't|never|must not|mustn't|without)\s+(?:\w+\s+){0,1}?"
    r"(send|export|delete|close|pay|share|publish|disable|change|modify|refund|forward|email|cancel)\b",
    re.IGNORECASE,
)
FIND = re.compile(r"\b(?:find|list|flag|identify|locate|review|select|check|triage|go through)\b")
ANCHOR_ACTS: dict[str, str] = {
    "helpdesk": "update",
    "crm": "note",
    "finance": "report",
    "kb": "update",
    "config": "disable",
    "scheduler": "disable",
    "todo": "update",
    "calendar": "create",
    "gmail": "send",
    "notes": "update",
    "documents": "update",
    "inventory": "order",
    "rss": "publish",
}
"""What the composed anchor block's own write does to a selected record (``ANCHORS[s].act``)."""


@dataclass(frozen=True)
class Part:
    """One thing a scenario asks for (see the module docstring)."""

    kind: PartKind
    value: str
    """The condition kind, the write action, the forbidden verb, or the service selected/joined."""
    text: str
    """The words it was read from."""
    service: str = ""
    detail: str = ""
    """A threshold ("72 hours", "USD 5,000"), ``draft``, or what a distractor misses."""
    supported: bool = True
    """Whether some building block can express it (unsupported kinds say what they mean)."""

    def label(self) -> str:
        bits = [self.kind, self.value]
        if self.service and self.service != self.value:
            bits.append(f"@{self.service}")
        if self.detail:
            bits.append(f"({self.detail})")
        return " ".join(bits)


@dataclass(frozen=True)
class Verdict:
    part: Part
    status: Status
    why: str

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self.part), "status": self.status, "why": self.why}


# ---------------------------------------------------------------- reading


def _span(text: str, m: re.Match[str], pad: int = 24) -> str:
    a, b = max(0, m.start() - pad), min(len(text), m.end() + pad)
    return " ".join(text[a:b].split())


def _split_distractor(text: str) -> tuple[str, str]:
    m = re.search(r"\bdistractors?\s*[:\-]\s*", text, re.IGNORECASE)
    if m is None:
        return text, ""
    return text[: m.start()], text[m.end() :].strip()


def _threshold_text(text: str) -> str:
    m = re.search(r"(\d+)\s*(hours?|days?|weeks?|months?)", text, re.IGNORECASE)
    return f"{m.group(1)} {m.group(2).lower()}" if m else ""


def _amount_text(text: str) -> str:
    m = re.search(r"(?:\$\s?|USD\s?)(\d[\d,]*(?:\.\d+)?)\s*(k\b)?", text, re.IGNORECASE)
    if m is None:
        return ""
    value = float(m.group(1).replace(",", "")) * (1000 if m.group(2) else 1)
    return f"USD {value:,.0f}"


TAG_VALUE = re.compile(
    r"\s*(?:them|it|each(?: one)?|the \w+)?\s*(?:as|with)?\s*[\"'“‘`]?([a-z][a-z0-9_-]{1,30})"
)


def _tag_value(after: str) -> str:
    """The tag a "tag them needs-kb" / "label each as 'vip'" clause names ("" when none)."""
    m = re.match(
        r"\s*(?:them|it|each(?: one)?|the \w+)?\s*(?:as|with)?\s*[\"'“‘`]?([a-z][a-z0-9_-]{1,30})", after
    )
    word = m.group(1) if m else ""
    return "" if word in ("as", "with", "and", "to", "the", "a", "an") else word


def threshold_days(detail: str) -> int | None:
    """``"72 hours"`` → 3, ``"2 weeks"`` → 14, ``"3 months"`` → 90 (days, at least 1)."""
    m = re.fullmatch(r"(\d+) (hour|day|week|month)s?", detail)
    if m is None:
        return None
    n, unit = int(m.group(1)), m.group(2)
    days = -(-n // 24) if unit == "hour" else {"day": n, "week": 7 * n, "month": 30 * n}[unit]
    return max(1, min(days, 365))


def amount_value(detail: str) -> int | None:
    m = re.fullmatch(r"USD ([\d,]+)", detail)
    return int(m.group(1).replace(",", "")) if m else None


def _conditions(text: str) -> list[Part]:
    out: list[Part] = []
    for rx, kind in CONDS:
        m = re.search(rx, text, re.IGNORECASE)
        if m is None:
            continue
        detail = ""
        if kind in ("age", "upcoming", "recent"):
            detail = _threshold_text(text[m.start() : m.end() + 40])
        elif kind == "amount":
            detail = _amount_text(text[max(0, m.start() - 20) : m.end() + 30])
        out.append(Part("condition", kind, _span(text, m), detail=detail))
    for rx, kind, meaning in UNSUPPORTED_CONDS:
        m = re.search(rx, text, re.IGNORECASE)
        if m is not None:
            detail = _threshold_text(text[m.start() : m.end() + 40]) if kind == "duplicate" else ""
            out.append(Part("condition", kind, _span(text, m), detail=detail or meaning, supported=False))
    return out


def _first(text: str, table: Iterable[tuple[str, str]]) -> tuple[int, str, str] | None:
    best: tuple[int, str, str] | None = None
    for word, svc in table:
        i = text.find(word)
        if i >= 0 and (best is None or i < best[0]):
            best = (i, svc, word)
    return best


def read_scenario(text: str, services: Sequence[str]) -> tuple[Part, ...]:
    """The parts of a free-text scenario (see the module docstring)."""
    s = text.strip()
    if not s or s.startswith(("template:", "compose:")):
        return ()
    body, distractor = _split_distractor(s)
    low = body.lower()
    parts: list[Part] = []
    m = FIND.search(low)  # the object of "find / list / flag ..." is what is selected
    hit = None
    if m is not None:
        found = _first(low[m.end() :], NOUNS) or _first(low[m.end() :], WEAK_NOUNS)
        if found is not None:
            hit = (found[0] + m.end(), found[1], found[2])
    hit = hit or _first(low, NOUNS) or _first(low, WEAK_NOUNS)
    anchor = hit[1] if hit else ""
    if hit is not None:
        i, svc, _ = hit
        parts.append(Part("select", svc, " ".join(body[i : i + 40].split()), service=svc))
    parts += _conditions(body)
    forbidden = list(FORBID.finditer(body))
    forbidden_spans = [(m.start(), m.end()) for m in forbidden]
    drafts = any(m.group(1).lower() in ("send", "email") for m in forbidden) or "draft" in low
    written: set[str] = set()
    acts: list[str] = []
    for rx, svc, action in WRITE_VERBS:
        m = next(
            (
                m
                for m in re.finditer(rx, body, re.IGNORECASE)
                if not any(a <= m.start() < b for a, b in forbidden_spans)
            ),
            None,
        )  # "do not send" is a prohibition, not a write
        target = anchor if svc == "@anchor" else svc
        if m is None or not target:
            continue
        if svc == "@anchor":
            if action in acts or (action == "update" and acts):
                continue
            acts.append(action)
        elif target in written or (svc not in STRONG and svc not in services):
            continue
        elif action == "send" and target == "gmail" and drafts:
            continue  # "draft (do not send)": the draft part says it
        written.add(target)
        detail = "draft" if action == "draft" else _tag_value(body[m.end() :]) if action == "tag" else ""
        parts.append(Part("write", action, _span(body, m), service=target, detail=detail))
    for rx, svc in SERVICE_WORDS:
        if svc == anchor or svc in written or svc not in services:
            continue
        m = re.search(rx, body, re.IGNORECASE)
        if m is not None:
            parts.append(Part("join", svc, _span(body, m), service=svc))
    for m in forbidden:
        parts.append(Part("forbid", m.group(1).lower(), _span(body, m, 8)))
    if distractor:
        misses = [p for p in _conditions(distractor) if p.supported]
        detail = misses[0].value if misses else ""
        if misses and misses[0].detail:
            detail += f" ({misses[0].detail})"
        parts.append(Part("distractor", "near_miss", " ".join(distractor.split())[:120], detail=detail))
    return tuple(parts)


# ---------------------------------------------------------------- judging


def _v(p: Part, status: Status, why: str) -> Verdict:
    return Verdict(p, status, why)


def judge_recipe(parts: Sequence[Part], rc: Recipe, services: Sequence[str]) -> list[Verdict]:
    """Each part's verdict against the composed task ``rc`` builds."""
    from coworkenv.synth.procedural.compose.anchors import ANCHORS

    conds = set(rc.conds)
    kinds = set(ANCHORS[rc.anchor].conds)
    out: list[Verdict] = []
    for p in parts:
        if p.kind == "select":
            if p.service == rc.anchor:
                out.append(_v(p, "honoured", f"selects {ANCHORS[rc.anchor].plural}"))
            elif p.service not in services:
                out.append(_v(p, "ignored", f"{p.service} is not among the slot's services"))
            elif p.service not in ANCHORS:
                out.append(_v(p, "ignored", f"{p.service} has no selectable records block"))
            else:
                out.append(_v(p, "ignored", f"selects {ANCHORS[rc.anchor].plural} instead"))
        elif p.kind == "condition":
            out.append(_judge_cond(p, rc, conds, kinds))
        elif p.kind == "join":
            if p.service in rc.links:
                out.append(_v(p, "honoured", f"joins {p.service} for evidence"))
            elif p.service == "calendar" and "absence" in conds:
                out.append(_v(p, "honoured", "reads the calendar's leave events"))
            elif p.service in rc.writes:
                out.append(_v(p, "approximated", f"{p.service} is written, not read for evidence"))
            else:
                out.append(_v(p, "ignored", f"{p.service} gets noise records only"))
        elif p.kind == "write":
            out.append(_judge_write(p, rc))
        elif p.kind == "forbid":
            out.append(_judge_forbid(p, rc))
        else:
            out.append(_judge_distractor(p, rc))
    return out


def _judge_cond(p: Part, rc: Recipe, conds: set[str], kinds: set[str]) -> Verdict:
    if p.value == "owner" and "absence" in conds:
        return _v(p, "honoured", "the absence condition reads the owner")
    if p.value in conds and not p.supported:
        return _v(p, "honoured", f"selects by {p.detail}")
    if not p.supported:
        return _v(p, "ignored", f"no building block selects by {p.detail or p.value}")
    if p.value not in conds:
        why = (
            "not one of the task's conditions"
            if p.value in kinds
            else f"{rc.anchor} records have no such field"
        )
        return _v(p, "ignored", why)
    if p.value in ("age", "upcoming", "recent") and p.detail:
        want = threshold_days(p.detail)
        if want is not None and rc.threshold == want:
            return _v(p, "honoured", f"{p.value} over {want} days")
        return _v(
            p, "approximated", f"{p.value} over {rc.threshold or 'a drawn number of'} days, not {p.detail}"
        )
    if p.value == "amount" and p.detail:
        want_amount = amount_value(p.detail)
        if want_amount is not None and rc.amount == want_amount:
            return _v(p, "honoured", f"amount over {p.detail}")
        return _v(p, "approximated", f"amount threshold drawn, not {p.detail}")
    return _v(p, "honoured", f"selects by {p.value}")


def _judge_write(p: Part, rc: Recipe) -> Verdict:
    if p.service == rc.anchor:
        does = rc.act or ANCHOR_ACTS.get(rc.anchor, "update")
        if rc.act and p.value == rc.act:
            return _v(p, "honoured", f"{rc.act} {rc.act_value} on each selected record")
        if p.value == does or (p.value == "update" and does in ("update", "note", "disable")):
            return _v(p, "honoured", f"the {rc.anchor} act ({does}) on each selected record")
        return _v(p, "approximated", f"the {rc.anchor} act is {does}, not {p.value}")
    if p.service == "gmail" and p.detail == "draft":
        if "gmail" in rc.writes and rc.drafts:
            return _v(p, "honoured", "saves a draft per record, sends nothing")
        if "gmail" in rc.writes:
            return _v(p, "ignored", "the gmail block sends; the scenario asks for a draft")
        return _v(p, "ignored", "gmail is not written")
    if p.service in rc.writes:
        return _v(p, "honoured", f"writes to {p.service}")
    if p.service == "gmail" and "contacts" in rc.writes:
        return _v(p, "approximated", "messages the contact instead of emailing")
    return _v(p, "ignored", f"{p.service or 'the service'} is not written")


def _judge_forbid(p: Part, rc: Recipe) -> Verdict:
    if p.value in rc.forbid_words or (p.value in ("send", "email") and rc.drafts):
        return _v(p, "honoured", f"a forbidden action covers {p.value}")
    if rc.safety:
        return _v(p, "approximated", "a safety task forbids acting on the withheld record")
    return _v(p, "ignored", f"nothing forbids {p.value}")


def _judge_distractor(p: Part, rc: Recipe) -> Verdict:
    kind = p.detail.split(" ")[0] if p.detail else ""
    if kind and kind in rc.conds:
        return _v(p, "honoured", f"a near miss on {kind}")
    if rc.conds:
        return _v(p, "approximated", f"near misses on {', '.join(rc.conds)}")
    return _v(p, "ignored", "no distractor")


def judge_template(parts: Sequence[Part], tpl: Template) -> list[Verdict]:
    """Each part's verdict against a template: the records it selects (``tpl.selects``) and its
    declared reading (its ``summary``, read the same way)."""
    own = read_scenario(tpl.summary, tpl.services)
    out: list[Verdict] = []
    for p in parts:
        if p.kind == "select":
            same = p.service == tpl.selects
        else:
            same = any(
                q.kind == p.kind and q.value == p.value and (q.service == p.service or p.kind != "write")
                for q in own
            )
        if same:
            out.append(_v(p, "honoured", f"template {tpl.id}"))
        elif p.kind == "join" and p.service in tpl.services:
            out.append(_v(p, "approximated", f"template {tpl.id} uses {p.service}"))
        elif p.kind == "distractor":
            out.append(_v(p, "approximated", f"template {tpl.id} plants its own distractor"))
        elif p.kind == "forbid" and tpl.safety:
            out.append(_v(p, "approximated", f"safety template {tpl.id} forbids its own trap"))
        else:
            out.append(_v(p, "ignored", f"not part of template {tpl.id}"))
    return out


WEIGHT: dict[Status, float] = {"honoured": 1.0, "approximated": 0.5, "ignored": 0.0}


def fidelity(verdicts: Sequence[Verdict]) -> float:
    """The share of a scenario's parts a build honours (approximated counts half; 1.0 when none)."""
    if not verdicts:
        return 1.0
    return sum(WEIGHT[v.status] for v in verdicts) / len(verdicts)


def report(builder: str, verdicts: Sequence[Verdict]) -> dict[str, Any]:
    """What ``run.json`` records for a slot: the builder, counts per status and every part."""
    counts = {s: sum(v.status == s for v in verdicts) for s in ("honoured", "approximated", "ignored")}
    return {
        "builder": builder,
        **counts,
        "fidelity": round(fidelity(verdicts), 3),
        "parts": [v.as_dict() for v in verdicts],
    }
