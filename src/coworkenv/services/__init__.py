"""Business services: typed records, one tool table each, copy-on-write trials with audit."""

from coworkenv.services.service import Clock, Record, Service, ServiceFixture, Table, TableDef, ToolDef, tool
from coworkenv.services.trial import AuditEvent, CallResult, Host, LoadedTask, Trial, load_task

__all__ = [
    "AuditEvent",
    "CallResult",
    "Clock",
    "Host",
    "LoadedTask",
    "Record",
    "Service",
    "ServiceFixture",
    "Table",
    "TableDef",
    "ToolDef",
    "Trial",
    "load_task",
    "tool",
]
