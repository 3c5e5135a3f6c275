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
  A composed build that selects by a condition the scenario does not name (none of its own fits
  the anchor) gets an ``added`` part, so the narrowing is reported too.
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

PartKind = Literal["select", "condition", "join", "write", "distractor", "forbid", "added"]
Status = Literal["honoured", "approximated", "ignored"]

NOUNS: tuple[tuple[str, str], ...] = (
    ("customer meeting", "calendar"),
    ("customer email", "gmail"),
    ("customer message", "gmail"),
    ("news article", "rss"),
    ("call note", "notes"),
    ("kb article", "kb"),
    ("backup job", "scheduler"),
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
"""Nouns of records a request selects (what follows "find ..."), strongest evidence of the anchor;
a compound ("customer meeting") is listed before its parts and wins where both match."""
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
NUMBER = r"(?:\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|a couple of)"
UNIT = r"(?:hours?|days?|weeks?|months?|years?)"
WORD_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2,
}  # fmt: skip
CONDS: tuple[tuple[str, str], ...] = (
    (
        rf"\bolder than\b|\b(?:more than|over|at least) {NUMBER} {UNIT}\b(?! from)|overdue|\bstale\b"
        rf"|last verified|not (?:been )?(?:updated|touched|reviewed|run|verified|contacted)"
        rf"|(?:have|has) not (?:heard|run|been)|haven't|no activity|without activity"
        rf"|\bopen for\b|\bopen {NUMBER} {UNIT}|{NUMBER} {UNIT} old|unanswered for|\bidle\b"
        rf"|\bfor {NUMBER} {UNIT}\b|{NUMBER} {UNIT} ago|\byesterday\b|\bafter {NUMBER} {UNIT}\b"
        rf"|{NUMBER} {UNIT} after (?:it was |they were )?(?:issued|created|opened|sent)",
        "age",
    ),
    (
        rf"\bwithin the next\b|\bupcoming\b|\btomorrow\b|\b(?:in )?the next {NUMBER} {UNIT}\b"
        rf"|\bnext {NUMBER} {UNIT}\b|\bdue (?:in|within)\b",
        "upcoming",
    ),
    (rf"\b(?:in |from )?the (?:last|past) {NUMBER} {UNIT}\b|\brecent|\blast week\b", "recent"),
    (
        r"\$\s?\d|\bUSD\b|\babove\b|\bamount\b|\brevenue\b|\bbelow\b|\bthreshold\b|\blow[- ]stock\b"
        r"|\breorder point\b|\bfell under\b",
        "amount",
    ),
    (
        r"\bcritical\b|\bfailed\b|\bfailing\b|\bat[ -]risk\b|\berror\b|\bpriority\b"
        r"|\bstatus\b(?! update| report| call| meeting)"
        r"|\bwarning\b",
        "status",
    ),
    (
        r"\bowned by\b|\bassigned to\b|\bowner\b|\bdeparted\b|\borganized by\b|\bcreated by\b"
        r"|\bwritten by\b|\bauthored by\b|\battended\b|\bshe organized\b|\bhe organized\b"
        r"|\bthey organized\b",
        "owner",
    ),
)
"""Selection conditions a composed anchor can express (the kinds in ``ANCHORS[...].conds``)."""
CROSS_CONDS: tuple[tuple[str, str, str, bool], ...] = (
    (
        r"\bduplicate|\bdouble[- ]charge|\bsame (?:amount|customer|invoice)\b.{0,40}\bwithin\b|\btwice\b"
        r"|\bequal (?:charges|amounts|payments)\b",
        "duplicate",
        "records repeating within a window (duplicates)",
        True,
    ),
    (
        r"\bon leave\b|\bout of (?:the )?office\b|\bon vacation\b|\babsent\b|\bunavailable\b|\bOOO\b",
        "absence",
        "a person's absence (from the calendar)",
        True,
    ),
    (
        r"\bno matching\b|\bwithout (?:a |any )?matching\b|\bhas no\b|\bhave no\b|\bmissing\b",
        "no_match",
        "a record with no matching record elsewhere",
        True,
    ),
    (r"\btier\b|\benterprise\b|\bpremium\b|\bgold\b|\bplatinum\b", "tier", "a customer tier", True),
    (r"\brecurring\b|\bmonthly\b|\bsubscription\b", "recurring", "a recurring pattern", False),
)
"""Condition kinds that read more than one field or service: (pattern, kind, what it means,
whether a block expresses it — ``EXTRA_CONDS`` of the anchors, needing the service it reads)."""
UNSUPPORTED_CONDS = tuple((rx, k, m) for rx, k, m, ok in CROSS_CONDS if not ok)
"""Condition kinds no block expresses: (pattern, kind, what it means)."""
TIERS = ("enterprise", "premium", "gold", "platinum")
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
EMAIL_VERB = (
    r"\be-?mail (?:the|each|them|it|every|all|him|her|a |an |one |[a-z0-9._-]+@)|\bnotify\b|\bremind\b"
    r"|\bsend\b|\binform\b|\bwrite to\b|\bby e-?mail\b|\bvia e-?mail\b|\ban e-?mail to\b|\breminder e-?mail\b"
)
""""email" as a verb ("email the owner", "notify by email"), not the noun ("an email asks")."""
WRITE_VERBS: tuple[tuple[str, str, str], ...] = (
    (r"\bdraft\b", "gmail", "draft"),
    (r"\breply\b|\brespond\b|\banswer (?:it|them|each)\b", "@reply", "reply"),
    (EMAIL_VERB, "gmail", "send"),
    (
        r"\b(?:create|add|open|make|into|becomes?) (?:a |an |one )?(?:follow-up |high-priority )?"
        r"(?:todo|to-do|task)\b|\bfollow-up (?:task|to-?do)\b",
        "todo",
        "create",
    ),
    (
        r"\bopen (?:a |new |a new |one )?tickets? (?:for|to|about)\b|\bopen (?:a |new |a new )tickets?\b"
        r"|\b(?:file|create|raise) (?:a |one )?(?:high-priority )?tickets?\b|\bticket it\b",
        "helpdesk",
        "create",
    ),
    (r"\breassign\w*|\bassign (?:it|them|each)\b", "@anchor", "reassign"),
    (r"\btag(?:s|ged)?\b|\blabel\w*|\bmark (?:it|them|each) as\b", "@anchor", "tag"),
    (r"\bclose\b|\bresolve\b", "@anchor", "close"),
    (r"\bcancel\b|\bcall off\b", "@anchor", "delete"),
    (r"\btrigger (?:a )?run\b|\brun (?:it|them|each)\b|\bre-?run\b|\bkick off\b", "@anchor", "run"),
    (
        r"\bbook(?:ed)?\b|\bschedule (?:a|an)\b|\bset up a (?:call|meeting)\b|\binvite\b"
        r"|\b(?:add|create) (?:a |an )?(?:meeting|event)\b",
        "calendar",
        "create",
    ),
    (r"\bdisable\w*|\bpause\b|\bsuspend\b", "@anchor", "disable"),
    (r"\breport\b", "finance", "report"),
    (r"\brefund\b", "finance", "refund"),
    (
        r"\blog (?:a |the )?note\b|\blog\b|\brecord (?:it|a note)\b|\bnote (?:it|on)\b"
        r"|\bupdate the (?:account|crm)\b|\badd a note\b",
        "crm",
        "note",
    ),
    (
        r"\bmessage (?:each|the|them|it|every|all)\b|\bping\b|\b(?:through|via) the (?:company )?directory\b",
        "contacts",
        "send",
    ),
    (r"\bshare\b", "notes", "share"),
    (r"\bpublish\b|\bnewsletter\b|\bbulletin\b", "rss", "publish"),
    (
        r"\bcompile\b|\bwrite (?:a|one|the) (?:\w+ )?(?:document|summary|digest|list)\b|\bsummary document\b",
        "documents",
        "create",
    ),
    (
        r"\brestock\b|\border (?:enough|more|\d+)\b|\bplace (?:an? )?orders?\b|\breorder\b(?! point)",
        "inventory",
        "order",
    ),
    (r"\bappend\b", "@anchor", "update"),
    (
        r"\bupdate\b|\bcorrect\b|\bmove\b|\bset\b|\bescalate\w*|\btriage\b|\bin progress\b|\bcomment\b",
        "@anchor",
        "update",
    ),
)
"""Write verbs: (pattern, service, action); ``@anchor`` acts on the selected records themselves,
``@reply`` replies to a selected email (or emails, when the records are not emails)."""
WITHHOLD = re.compile(r"\bwithhold\w*\b[^.;]*", re.IGNORECASE)
"""A clause whose writes are withheld, not made."""
INCOMING = re.compile(
    r"\b(?:an?|the) (?:e-?mail|message)\b.{0,20}\b(?:asks|requests|from|says)\b|\bemails? us\b"
)
"""An email the scenario is about ("an email asks us to ..."): "reply" answers that email."""
STRONG = frozenset({"gmail", "todo", "helpdesk", "calendar"})
"""Services whose write verbs are read even when the slot lacks the service (then reported)."""
FORBID = re.compile(
    r"\b(?:do not|don't|never|must not|mustn't|without)\s+(?:\w+\s+){0,1}?"
    r"(send|export|delete|close|pay|share|publish|disable|change|modify|refund|forward|email|cancel|order"
    r"|reply|run)\b",
    re.IGNORECASE,
)
FIND = re.compile(
    r"\b(?:find|(?<!to-do )(?<!todo )(?<!customer )(?<!the )(?<!my )(?<!full )(?<!task )list|flag|identify"
    r"|locate|review|select|check|triage|go through)\b(?! the (?:relevant|matching|related|right|current"
    r"|corresponding)\b)"
)
"""The verbs whose object is what a task selects (not "the to-do list", not "find the relevant
article", which looks up evidence)."""
ANCHOR_ACTS: dict[str, str] = {
    "helpdesk": "update",
    "crm": "note",
    "finance": "report",
    "kb": "update",
    "config": "disable",
    "scheduler": "disable",
    "todo": "update",
    "calendar": "create",
    "gmail": "reply",
    "notes": "share",
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
    """The first duration written in ``text`` ("72 hours", "a week" → "1 week", "six months")."""
    m = re.search(rf"\b({NUMBER})\s*-?\s*({UNIT})\b", text, re.IGNORECASE)
    if m is None:
        return ""
    n = m.group(1).lower()
    value = int(n) if n.isdigit() else WORD_NUMBERS[n]
    unit = m.group(2).lower().rstrip("s")
    return f"{value} {unit}{'s' if value != 1 else ''}"


def _amount_text(text: str) -> str:
    m = re.search(r"(?:\$\s?|USD\s?)(\d[\d,]*(?:\.\d+)?)\s*(k\b)?", text, re.IGNORECASE)
    if m is None:
        return ""
    value = float(m.group(1).replace(",", "")) * (1000 if m.group(2) else 1)
    return f"USD {value:,.0f}"


TAG_WORD = r"[\"'“‘`]?([a-z][a-z0-9_-]{1,30})"
SKIP_WORDS = frozenset({"as", "with", "and", "to", "the", "a", "an", "every", "each", "all", "them", "it"})


def _tag_value(after: str) -> str:
    """The tag a "tag them needs-kb" / "label each as 'vip'" / "label every ... as sla-breach"
    clause names ("" when none)."""
    clause = re.split(r"[.;:]\s", after, maxsplit=1)[0]
    m = re.search(rf"\b(?:as|with (?:the )?(?:tag|label))\s+{TAG_WORD}", clause) or re.match(
        rf"\s*(?:them|it|each(?: one)?|the \w+)?\s*{TAG_WORD}", clause
    )
    word = m.group(1) if m else ""
    return "" if word in SKIP_WORDS else word


ADDRESS = re.compile(r"[a-z0-9][a-z0-9._+-]*@[a-z0-9-]+(?:\.[a-z0-9-]+)+", re.IGNORECASE)


def _address(clause: str) -> str:
    """The address a write names in its own sentence ("email security@company.com"), or ""."""
    sentence = re.split(r"(?<=[.;])\s", clause, maxsplit=1)[0]
    m = ADDRESS.search(sentence)
    return m.group(0).rstrip(".").lower() if m else ""


STATUS_VALUES = ("critical", "high", "medium", "low", "at_risk", "failed", "warning", "error", "degraded")


def _status_word(text: str) -> str:
    """The status value a status condition names ("low-priority" → low, "at risk" → at_risk)."""
    m = re.search(
        r"\b(critical|high|medium|low)[- ]priority\b|\b(at[ -]risk|failed|failing|warning|error|degraded)\b"
        r"|\b(critical)\b",
        text,
        re.IGNORECASE,
    )
    if m is None:
        return ""
    word = (m.group(1) or m.group(2) or m.group(3)).lower().replace("-", "_").replace(" ", "_")
    return {"failing": "failed"}.get(word, word)


def threshold_days(detail: str) -> int | None:
    """``"72 hours"`` → 3, ``"2 weeks"`` → 14, ``"3 months"`` → 90, ``"1 year"`` → 365 (days, 1–365)."""
    m = re.fullmatch(r"(\d+) (hour|day|week|month|year)s?", detail)
    if m is None:
        return None
    n, unit = int(m.group(1)), m.group(2)
    days = (
        -(-n // 24) if unit == "hour" else {"day": n, "week": 7 * n, "month": 30 * n, "year": 365 * n}[unit]
    )
    return max(1, min(days, 365))


def amount_value(detail: str) -> int | None:
    m = re.fullmatch(r"USD ([\d,]+)", detail)
    return int(m.group(1).replace(",", "")) if m else None


NAME = r"[A-Z][a-z]+(?:[- ][A-Z][a-z]+)+"
NOT_NAMES = frozenset({"Customer", "Every", "Cancel", "Find", "List", "Any", "Our", "The", "For", "Each"})


def owner_name(text: str) -> str:
    """The person an owner condition names ("assigned to Kenji Mori", "Marco Bianchi attended",
    "Lena Fischer has left"), or ""."""
    verbs = r"assigned to|owned by|organized by|created by|written by|authored by|attended by"
    m = re.search(rf"\b(?:{verbs})\s+({NAME})", text) or re.search(
        rf"\b({NAME})\s+(?:attended|organized|owns|created|wrote|has left|left|is leaving|departed)\b", text
    )
    if m is None:
        return ""
    name = m.group(1)
    return "" if name.split()[0] in NOT_NAMES else name


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
        elif kind == "owner":
            detail = owner_name(text)
        elif kind == "status":
            detail = _status_word(text)
        out.append(Part("condition", kind, _span(text, m), detail=detail))
    for rx, kind, meaning, supported in CROSS_CONDS:
        m = re.search(rx, text, re.IGNORECASE)
        if m is None:
            continue
        detail = meaning
        if kind == "duplicate":
            detail = _threshold_text(text[m.start() : m.end() + 60]) or meaning
        elif kind == "tier":
            detail = next((t for t in TIERS if re.search(rf"\b{t}\b", text, re.IGNORECASE)), "") or meaning
        out.append(Part("condition", kind, _span(text, m), detail=detail, supported=supported))
    return out


def _first(text: str, table: Iterable[tuple[str, str]]) -> tuple[int, str, str] | None:
    best: tuple[int, str, str] | None = None
    for word, svc in table:
        i = text.find(word)
        if i >= 0 and (best is None or i < best[0]):
            best = (i, svc, word)
    return best


@dataclass(frozen=True)
class Admitted:
    """A write verb resolved against the selection: the service it writes and the action."""

    target: str
    action: str
    on_anchor: bool

    def fresh(self, written: set[str], acts: list[str], drafts: bool) -> bool:
        """Whether it is a new write part (one act per kind on the anchor — an update only when no
        other act; one write per other service; no send where the scenario drafts); records it."""
        if self.on_anchor:
            if self.action in acts or (self.action == "update" and acts):
                return False
            acts.append(self.action)
        elif self.target in written or (self.action == "send" and self.target == "gmail" and drafts):
            return False
        written.add(self.target)
        return True


def admit_write(
    verb_svc: str, verb_action: str, anchor: str, incoming: bool, services: Sequence[str]
) -> Admitted | None:
    """Resolve a write verb's service (``@anchor``: the selected records; ``@reply``: the
    selected emails, the email the scenario is about when ``incoming``, else a new email); None
    when it writes nowhere (no anchor, or a weak service the slot lacks). Shared by both readers."""
    svc, action = verb_svc, verb_action
    if svc == "@reply":
        if anchor == "gmail":
            svc = "@anchor"
        else:
            svc, action = "gmail", "reply" if incoming else "send"
    target = anchor if svc == "@anchor" else svc
    if not target or (svc != "@anchor" and svc not in STRONG and svc not in services):
        return None
    return Admitted(target, action, svc == "@anchor")


def _writes(
    body: str, anchor: str, services: Sequence[str], forbidden_spans: list[tuple[int, int]], drafts: bool
) -> list[Part]:
    """The write parts of a scenario's body (see :data:`WRITE_VERBS`); a prohibited or withheld
    verb is not a write, and a draft scenario's "send" is its draft."""
    low = body.lower()
    out: list[Part] = []
    written: set[str] = set()
    acts: list[str] = []
    for rx, verb_svc, verb_action in WRITE_VERBS:
        m = next(
            (
                m
                for m in re.finditer(rx, body, re.IGNORECASE)
                if not any(a <= m.start() < b for a, b in forbidden_spans)
            ),
            None,
        )  # "do not send" is a prohibition, not a write
        admitted = admit_write(verb_svc, verb_action, anchor, INCOMING.search(low) is not None, services)
        if m is None or admitted is None or not admitted.fresh(written, acts, drafts):
            continue
        target, action = admitted.target, admitted.action
        detail = "draft" if action == "draft" else _tag_value(body[m.end() :]) if action == "tag" else ""
        if action in ("send", "share", "publish", "reply") and not detail:
            detail = _address(body[m.start() :])
        out.append(Part("write", action, _span(body, m), service=target, detail=detail))
    return out


def read_scenario(text: str, services: Sequence[str]) -> tuple[Part, ...]:
    """The parts of a free-text scenario (see the module docstring)."""
    s = text.strip()
    if not s or s.startswith(("template:", "compose:")):
        return ()
    if re.search(r"[\u4e00-\u9fff]", s):  # a Chinese scenario: the same parts, read from Chinese
        from coworkenv.synth.procedural.zh import read_scenario_zh

        return read_scenario_zh(s, services)
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
    whose = re.search(r"\b(?:whose|with an?|that ha(?:s|ve) an?)\b|'s\b", low[hit[0] :]) if hit else None
    if hit is not None and whose is not None and whose.start() < 40:
        # "customers whose tickets have waited 2 days": the condition is on the tickets
        at = hit[0] + whose.end()
        owned = _first(low[at : at + 30], NOUNS)
        if owned is not None and owned[1] != hit[1]:
            hit = (at + owned[0], owned[1], owned[2])
    anchor = hit[1] if hit else ""
    if hit is not None:
        i, svc, _ = hit
        parts.append(Part("select", svc, " ".join(body[i : i + 40].split()), service=svc))
    parts += _conditions(body)
    forbidden = list(FORBID.finditer(body))
    forbidden_spans = [(m.start(), m.end()) for m in forbidden]
    withheld = list(WITHHOLD.finditer(body))  # "withhold the update and the payment report"
    forbidden_spans += [(m.start(), m.end()) for m in withheld]
    drafts = any(m.group(1).lower() in ("send", "email") for m in forbidden) or "draft" in low
    parts += _writes(body, anchor, services, forbidden_spans, drafts)
    written = {p.service for p in parts if p.kind == "write"}
    for rx, svc in SERVICE_WORDS:
        if svc == anchor or svc in written or svc not in services:
            continue
        m = re.search(rx, body, re.IGNORECASE)
        if m is not None:
            parts.append(Part("join", svc, _span(body, m), service=svc))
    for m in forbidden:
        parts.append(Part("forbid", m.group(1).lower(), _span(body, m, 8)))
    for m in withheld[:1]:
        parts.append(Part("forbid", "change", _span(body, m, 8)))
    if distractor:
        misses = [p for p in _conditions(distractor) if p.supported]
        if not misses and "recurring" in distractor.lower() and any(p.value == "duplicate" for p in parts):
            misses = [Part("condition", "duplicate", distractor)]  # the same charge outside the window
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
            elif p.service == "kb" and "no_match" in conds:
                out.append(_v(p, "honoured", "searches the knowledge base for each category"))
            elif p.service == "crm" and "tier" in conds:
                out.append(_v(p, "honoured", "reads each customer's tier in the CRM"))
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
    named = {p.value for p in parts if p.kind == "condition"} | ({"owner"} if "absence" in conds else set())
    if any(p.kind == "condition" for p in parts):
        for k in rc.conds:  # a drawn condition narrows the selection the scenario describes
            if k not in named:
                extra = Part("added", k, "", detail="a condition the scenario does not name")
                out.append(_v(extra, "approximated", f"selects by a drawn {k} condition as well"))
    return out


def _judge_cond(p: Part, rc: Recipe, conds: set[str], kinds: set[str]) -> Verdict:
    if p.value == "owner" and "absence" in conds:
        return _v(p, "honoured", "the absence condition reads the owner")
    if p.value == "owner" and p.value in conds and p.detail and rc.owner_name != p.detail:
        return _v(p, "approximated", f"selects by a drawn owner, not {p.detail}")
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
    if p.service == "gmail" and p.value == "reply":
        if "gmail" in rc.writes:
            return _v(
                p, "approximated", "emails about each record; no reply to the email the scenario is about"
            )
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
