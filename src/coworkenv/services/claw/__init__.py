"""The Claw-Eval service profile: every service answering as Claw-Eval's mock services do.

Contract: :data:`SERVICES` maps a service name to its Claw-Eval-profile class; :data:`ROUTES` maps
every route Claw-Eval's services serve to its tool; :func:`resolve_tool` gives the tool a task
declares — by the task's own route (``tool_endpoints``) when it has one, else by name (with
:data:`ALIASES`, the other names Claw-Eval tasks give the same route) — renamed to the task's
name. A declared tool whose route Claw-Eval does not serve resolves to a tool answering 404
``{"detail": "Not Found"}`` (as Claw-Eval's FastAPI does), so every declared tool exists.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from coworkenv.services.claw.base import ClawService
from coworkenv.services.claw.comms import ClawConfig, ClawContacts, ClawGmail, ClawNotes, ClawRss
from coworkenv.services.claw.ops import ClawCrm, ClawFinance, ClawHelpdesk, ClawInventory, ClawKb
from coworkenv.services.claw.planning import ClawCalendar, ClawScheduler, ClawTodo
from coworkenv.services.service import LaxArgs, Service, ToolDef

_CLASSES: tuple[type[ClawService], ...] = (
    ClawGmail,
    ClawContacts,
    ClawNotes,
    ClawRss,
    ClawConfig,
    ClawHelpdesk,
    ClawCrm,
    ClawFinance,
    ClawInventory,
    ClawTodo,
    ClawScheduler,
    ClawCalendar,
    ClawKb,
)

SERVICES: Mapping[str, type[Service]] = MappingProxyType({c.name: c for c in _CLASSES})
ROUTES: Mapping[str, ToolDef] = MappingProxyType(
    {t.route: t for c in _CLASSES for t in c.tool_table.values()}
)
TOOLS: Mapping[str, ToolDef] = MappingProxyType({t.name: t for t in ROUTES.values()})

ALIASES: Mapping[str, str] = MappingProxyType(
    {
        "inventory_list_items": "inventory_list_products",
        "inventory_get_item": "inventory_get_product",
        "crm_export_customers": "crm_export_report",
        "finance_submit_report": "finance_report_submit",
        "config_notify": "config_send_notification",
        "kb_articles_update": "kb_update_article",
    }
)
"""Other names Claw-Eval tasks (or our strict registry) give a route Claw-Eval serves."""

_DEFAULT_ROUTES: Mapping[str, str] = MappingProxyType(
    {"todo_get_task": "/todo/tasks/get", "rss_get_feed": "/rss/feeds/get"}
)
"""Routes tasks declare that Claw-Eval's services lack (they answer 404 there, and here)."""


class _Nothing(LaxArgs):
    """A tool that is not served takes any body."""


def resolve_tool(name: str, route: str | None) -> ToolDef | None:
    """The tool a task declares as ``name`` (at ``route`` if task.yaml gives one); None if unknown."""
    if route is not None and route in ROUTES:
        return dataclasses.replace(ROUTES[route], name=name)
    known = TOOLS.get(ALIASES.get(name, name))
    if known is not None and route is None:
        return dataclasses.replace(known, name=name)
    route = route or _DEFAULT_ROUTES.get(name)
    service = route.strip("/").split("/", 1)[0] if route else name.split("_", 1)[0]
    if route is None or service not in SERVICES:
        return None
    return ToolDef(
        name=name,
        service=service,
        route=route,
        kind="read",
        audit=None,
        description=f"{name} (route {route}, not served by Claw-Eval's {service} service)",
        args_model=_Nothing,
        method="claw_not_served",
        error_style="fastapi",
    )


def service_routes(services: Mapping[str, Any]) -> dict[str, ToolDef]:
    """Every route Claw-Eval serves for these services (its servers answer all of them)."""
    return {r: t for r, t in ROUTES.items() if t.service in services}
