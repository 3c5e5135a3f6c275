"""The service registry: every service class, and every tool by name.

Tool names are globally unique (they carry their service's prefix, as in Claw-Eval), so a task's
``tools`` list resolves without naming services. Adding a service = adding its class to
``_CLASSES``; a duplicate tool name or route is an import-time error.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from coworkenv.services.calendar import Calendar
from coworkenv.services.config import Config
from coworkenv.services.contacts import Contacts
from coworkenv.services.crm import Crm
from coworkenv.services.documents import Documents
from coworkenv.services.finance import Finance
from coworkenv.services.gmail import Gmail
from coworkenv.services.helpdesk import Helpdesk
from coworkenv.services.inventory import Inventory
from coworkenv.services.kb import KnowledgeBase
from coworkenv.services.notes import Notes
from coworkenv.services.rss import Rss
from coworkenv.services.scheduler import Scheduler
from coworkenv.services.service import Service, ToolDef
from coworkenv.services.todo import Todo

_CLASSES: tuple[type[Service], ...] = (
    Helpdesk,
    Gmail,
    Contacts,
    Crm,
    KnowledgeBase,
    Finance,
    Documents,
    Calendar,
    Todo,
    Notes,
    Inventory,
    Rss,
    Config,
    Scheduler,
)


def _build() -> tuple[Mapping[str, type[Service]], Mapping[str, ToolDef]]:
    services: dict[str, type[Service]] = {}
    tools: dict[str, ToolDef] = {}
    routes: dict[str, str] = {}
    for cls in _CLASSES:
        if cls.name in services:
            raise RuntimeError(f"duplicate service name {cls.name!r}")
        services[cls.name] = cls
        for tname, tdef in cls.tool_table.items():
            if tname in tools:
                raise RuntimeError(f"duplicate tool name {tname!r} ({cls.name} and {tools[tname].service})")
            if tdef.route in routes:
                raise RuntimeError(f"route {tdef.route} used by {tname} and {routes[tdef.route]}")
            tools[tname] = tdef
            routes[tdef.route] = tname
    return MappingProxyType(services), MappingProxyType(tools)


SERVICES, TOOLS = _build()
