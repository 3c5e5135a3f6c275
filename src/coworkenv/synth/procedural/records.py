"""Seeded synthetic records: people, companies, products, topics, ids and dates.

Contract: :class:`Rng` is a ``random.Random`` seeded from a SHA-256 of its key parts, so the same
parts give the same draws on every machine and Python version (no ``hash()``, no dict/set order,
no wall clock). Every ``unique_*`` helper never returns a value it already returned to the same
``Rng`` (so a task never holds two people with one name or two records with one id). Dates are
ISO strings relative to the slot's ``mock_today``.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from datetime import date, timedelta

FIRST = (
    "Aisha",
    "Ben",
    "Carla",
    "Dmitri",
    "Elena",
    "Farid",
    "Grace",
    "Hiro",
    "Ines",
    "Jonas",
    "Keiko",
    "Liam",
    "Maya",
    "Nikhil",
    "Olga",
    "Pablo",
    "Quinn",
    "Rosa",
    "Samir",
    "Tara",
    "Umar",
    "Vera",
    "Wen",
    "Ximena",
    "Yusuf",
    "Zoe",
    "Amara",
    "Bruno",
    "Chen",
    "Dalia",
    "Emil",
    "Fatima",
    "Goran",
    "Hana",
    "Ivan",
    "Jade",
    "Kofi",
    "Lena",
    "Marco",
    "Nora",
    "Omar",
    "Priya",
    "Rafael",
    "Sofia",
    "Tomas",
    "Uma",
    "Viktor",
    "Yara",
)
LAST = (
    "Abbott",
    "Banerjee",
    "Castillo",
    "Dubois",
    "Eriksen",
    "Fischer",
    "Garcia",
    "Haddad",
    "Ito",
    "Jensen",
    "Kowalski",
    "Lindqvist",
    "Moreau",
    "Nakamura",
    "Okafor",
    "Petrov",
    "Quintero",
    "Rossi",
    "Schmidt",
    "Tanaka",
    "Ueda",
    "Varga",
    "Walsh",
    "Xu",
    "Yilmaz",
    "Zimmer",
    "Alvarez",
    "Brennan",
    "Costa",
    "Demir",
    "Evans",
    "Ferreira",
    "Gupta",
    "Holm",
    "Ibrahim",
    "Kaur",
    "Larsen",
    "Mendes",
    "Novak",
    "Ortiz",
)
CO_HEAD = (
    "Northwind",
    "Bluepeak",
    "Crestline",
    "Halcyon",
    "Orion",
    "Vantage",
    "Kestrel",
    "Lumen",
    "Summit",
    "Granite",
    "Bluefin",
    "Redwood",
    "Silverline",
    "Ironbridge",
    "Meridian",
    "Aurora",
    "Cobalt",
    "Harbor",
    "Juniper",
    "Maple",
    "Nimbus",
    "Pioneer",
    "Quarry",
    "Riverton",
    "Sterling",
    "Tidewater",
    "Umber",
    "Verdant",
    "Willow",
    "Zenith",
    "Amber",
    "Beacon",
    "Cedar",
    "Delta",
    "Ember",
    "Falcon",
)
CO_TAIL = (
    "Logistics",
    "Retail",
    "Health",
    "Media",
    "Freight",
    "Packaging",
    "Analytics",
    "Outdoor",
    "Insurance",
    "Travel",
    "Foods",
    "Robotics",
    "Energy",
    "Labs",
    "Textiles",
    "Dental",
    "Studios",
    "Partners",
    "Systems",
    "Supplies",
    "Clinics",
    "Software",
    "Apparel",
    "Motors",
)
DEPARTMENTS = ("Engineering", "Sales", "Finance", "Design", "Marketing", "Operations", "Legal", "Support")
CITIES = (
    "Berlin",
    "Lisbon",
    "Toronto",
    "Osaka",
    "Nairobi",
    "Austin",
    "Dublin",
    "Seoul",
    "Madrid",
    "Oslo",
    "Chicago",
    "Prague",
    "Denver",
    "Milan",
    "Sydney",
    "Warsaw",
    "Boston",
    "Vienna",
    "Lagos",
    "Lyon",
)
PROJECTS = (
    "Atlas",
    "Beacon",
    "Cascade",
    "Drift",
    "Echo",
    "Falcon",
    "Glacier",
    "Helix",
    "Ion",
    "Jetstream",
    "Keystone",
    "Lantern",
    "Mosaic",
    "Nova",
    "Orbit",
    "Prism",
    "Quasar",
    "Relay",
    "Sierra",
    "Tundra",
)
PRODUCTS = (
    ("Ergonomic chair", "furniture"),
    ("Standing desk", "furniture"),
    ("Monitor arm", "furniture"),
    ("USB-C dock", "electronics"),
    ("27in monitor", "electronics"),
    ("Wireless headset", "electronics"),
    ("Laptop stand", "accessories"),
    ("Webcam HD", "electronics"),
    ("Printer paper A4", "office"),
    ("Toner cartridge", "office"),
    ("Whiteboard markers", "office"),
    ("Keyboard", "electronics"),
    ("Mouse", "electronics"),
    ("Desk lamp", "furniture"),
    ("Filing cabinet", "furniture"),
    ("Notebook pack", "office"),
    ("HDMI cable", "accessories"),
    ("Power strip", "accessories"),
)
SAAS = (
    "Figma",
    "Notion",
    "Zoom",
    "Miro",
    "Loom",
    "Airtable",
    "Asana",
    "Dropbox",
    "Calendly",
    "Grammarly",
    "Canva",
    "Datadog",
    "Sentry",
    "Intercom",
    "HubSpot",
    "Linear",
    "Postman",
    "Retool",
)


def seed_int(*parts: object) -> int:
    """A stable 64-bit seed from the parts' text (never Python's salted ``hash``)."""
    text = "\x1f".join(str(p) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


@dataclass(frozen=True)
class Person:
    first: str
    last: str
    domain: str
    department: str
    mailbox: str = ""
    """An address a scenario wrote ("security@company.com"), used as is."""

    @property
    def name(self) -> str:
        return f"{self.first} {self.last}"

    @property
    def email(self) -> str:
        if self.mailbox:
            return self.mailbox
        return f"{self.first.lower()}.{self.last.lower().replace(' ', '')}@{self.domain}"


@dataclass(frozen=True)
class Company:
    name: str
    domain: str


class Rng(random.Random):
    """Deterministic draws for one task, plus uniqueness bookkeeping."""

    def __init__(self, *parts: object, today: date) -> None:
        super().__init__(seed_int(*parts))
        self.today = today
        self._used: set[str] = set()

    # -- uniqueness

    def _fresh(self, make: object, kind: str) -> str:
        for _ in range(500):
            value = make() if callable(make) else str(make)
            key = f"{kind}:{value}"
            if key not in self._used:
                self._used.add(key)
                return str(value)
        raise RuntimeError(f"record pool for {kind} exhausted")

    def uid(self, prefix: str, width: int = 4) -> str:
        """A fresh id like ``TK-4821`` (fixed width, so no id is a substring of another)."""
        lo, hi = 10 ** (width - 1), 10**width - 1
        return self._fresh(lambda: f"{prefix}{self.randint(lo, hi)}", "id")

    def person(
        self, domain: str = "company.com", department: str | None = None, first: str | None = None
    ) -> Person:
        f = first or self.choice(FIRST)
        last = self._fresh(lambda: self.choice(LAST), f"last:{f}")
        return Person(f, last, domain, department or self.choice(DEPARTMENTS))

    def namesake(self, p: Person, department: str) -> Person:
        """Same first name, a different surname and department: the classic look-alike."""
        return self.person(p.domain, department, first=p.first)

    def company(self) -> Company:
        name = self._fresh(lambda: f"{self.choice(CO_HEAD)} {self.choice(CO_TAIL)}", "company")
        return Company(name, name.lower().replace(" ", "-") + ".com")

    def pick(self, pool: tuple[str, ...], kind: str) -> str:
        return self._fresh(lambda: self.choice(pool), kind)

    def product(self, category: str) -> str:
        """A fresh product name of ``category`` (furniture, electronics, office or accessories)."""
        return self._fresh(lambda: self.choice([n for n, c in PRODUCTS if c == category]), "product")

    def money(self, lo: int, hi: int) -> float:
        """An amount with cents, e.g. 1234.5 (two decimals at most)."""
        return round(self.randint(lo * 100, hi * 100) / 100, 2)

    # -- dates relative to mock_today

    def day(self, offset: int) -> str:
        return (self.today + timedelta(days=offset)).isoformat()

    def ts(self, offset: int, hour: int = 9, minute: int = 0) -> str:
        return f"{self.day(offset)}T{hour:02d}:{minute:02d}:00Z"

    def date_of(self, offset: int) -> date:
        return self.today + timedelta(days=offset)


def money_text(amount: float) -> str:
    """``1234.5`` → ``1,234.50`` (how amounts appear in requests and messages)."""
    return f"{amount:,.2f}"
