"""Scheduler: cron jobs with execution history. Claw-Eval compatible (routes under ``/scheduler``,
audit collections ``created_jobs``, ``updated_jobs``, ``deleted_jobs``), plus ``scheduler_run_job``
(audit ``runs``) for ops tasks.

``status`` filters match the last run status (success/failed/...), a job's own ``status`` field, or
``enabled``/``disabled``; ``all`` lists every job. Execution history is newest first. A manual run is
deterministic: it repeats the job's last outcome (a failing job keeps failing until the task's
fixture says otherwise via ``manual_run_status``) and is refused for a disabled job.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar

from croniter import CroniterBadDateError, croniter
from pydantic import Field

from coworkenv.errors import invalid
from coworkenv.services.service import Record, Service, TableDef, tool


class Job(Record):
    job_id: str
    name: str = ""
    description: str = ""
    cron_expression: str = ""
    action: str = ""
    enabled: bool = True
    last_status: str | None = None
    last_run: str | None = None
    next_run: str | None = None
    created_by: str | None = None
    tags: list[str] = Field(default_factory=list)
    execution_history: list[dict[str, Any]] = Field(default_factory=list)


_SUMMARY = ("job_id", "name", "cron_expression", "enabled", "last_status", "last_run", "next_run", "tags")
_ID = Annotated[str, Field(description="Job ID")]


def _status_matches(job: Mapping[str, Any], status: str) -> bool:
    want = status.strip().lower()
    if want in ("", "all"):
        return True
    if want in ("enabled", "disabled") and bool(job.get("enabled", True)) == (want == "enabled"):
        return True
    return want in (str(job.get("last_status") or "").lower(), str(job.get("status") or "").lower())


def _check_cron(expr: str) -> None:
    if len(expr.split()) not in (5, 6):
        raise invalid(f"cron_expression must have 5 fields (minute hour day month weekday), got {expr!r}")
    if not croniter.is_valid(expr):
        raise invalid(f"cron_expression {expr!r} is not a valid schedule (a field is out of range)")


def _next_run(expr: str, now: datetime) -> str:
    """When ``expr`` next fires after ``now`` (ISO, UTC). A schedule that never fires — 30 February,
    31 April — is refused: it would leave a job enabled that never runs."""
    try:
        nxt: datetime = croniter(expr, now, max_years_between_matches=_YEARS).get_next(datetime)
    except CroniterBadDateError:
        raise invalid(
            f"cron_expression {expr!r} never fires: no date matches it within {_YEARS} years"
        ) from None
    return nxt.astimezone(UTC).isoformat().replace("+00:00", "Z")


_YEARS = 8  # a leap day (29 February) fires within 8 years whatever the start


class Scheduler(Service):
    name = "scheduler"
    title = "Job scheduler"
    tables: ClassVar[Mapping[str, TableDef]] = {"jobs": TableDef(Job, "job_id", "jobs.json")}
    audit_keys = ("created_jobs", "updated_jobs", "deleted_jobs", "runs")

    @tool("/scheduler/jobs")
    def scheduler_list_jobs(
        self,
        status: Annotated[str | None, Field(description="Filter by last run status (success/failed) "
                                                        "or all/enabled/disabled")] = None,
        enabled: Annotated[bool | None, Field(description="Filter by enabled state")] = None,
        tag: Annotated[str | None, Field(description="Filter by tag")] = None,
    ) -> dict[str, Any]:
        """List scheduled jobs (summary fields), filtered by status, enabled state and tag."""
        out = []
        for j in self.table("jobs"):
            if status and not _status_matches(j, status):
                continue
            if enabled is not None and bool(j.get("enabled", True)) != enabled:
                continue
            if tag and tag.strip().lower() not in [str(t).lower() for t in j.get("tags", [])]:
                continue
            out.append({k: j.get(k, [] if k == "tags" else None) for k in _SUMMARY})
        return {"jobs": out, "total": len(out)}

    @tool("/scheduler/jobs/get")
    def scheduler_get_job(self, job_id: _ID) -> dict[str, Any]:
        """Get scheduled job details (including execution history)."""
        return dict(self.table("jobs").require(job_id, "Job"))

    @tool("/scheduler/jobs/history")
    def scheduler_job_history(
        self,
        job_id: _ID,
        limit: Annotated[int, Field(description="Number of records to return", ge=1)] = 10,
    ) -> dict[str, Any]:
        """View a job's execution history (newest first)."""
        history = list(self.table("jobs").require(job_id, "Job").get("execution_history", []))
        return {"job_id": job_id, "history": history[:limit], "total": len(history)}

    @tool("/scheduler/jobs/create", write=True, audit="created_jobs")
    def scheduler_create_job(
        self,
        *,
        name: Annotated[str, Field(description="Job name", min_length=1)],
        cron_expression: Annotated[str, Field(description="Cron schedule, e.g. '0 2 * * *'")],
        action: Annotated[str, Field(description="What the job runs", min_length=1)],
        enabled: Annotated[bool, Field(description="Enabled on creation")] = True,
        tags: Annotated[list[str] | None, Field(description="Tags")] = None,
        created_by: Annotated[str | None, Field(description="Owner")] = None,
    ) -> dict[str, Any]:
        """Create a scheduled job."""
        _check_cron(cron_expression)
        next_run = _next_run(cron_expression, self.clock.now())
        jobs = self.table("jobs")
        n = len(jobs) + 1
        while f"JOB-{n:03d}" in jobs:
            n += 1
        job = {
            "job_id": f"JOB-{n:03d}", "name": name, "cron_expression": cron_expression, "action": action,
            "enabled": enabled, "last_run": None, "next_run": next_run if enabled else None,
            "last_status": None,
            "created_by": created_by, "tags": list(tags or []), "created_at": self.clock.now().isoformat(),
            "execution_history": [],
        }
        stored = dict(jobs.put(job))
        self.emit("created_jobs", stored)
        return {"status": "created", "job": stored}

    @tool("/scheduler/jobs/update", write=True, audit="updated_jobs")
    def scheduler_update_job(
        self,
        *,
        job_id: _ID,
        enabled: Annotated[bool | None, Field(description="Enable (true) or disable (false) the job")] = None,
        cron_expression: Annotated[str | None, Field(description="New cron schedule")] = None,
        name: Annotated[str | None, Field(description="New name")] = None,
        action: Annotated[str | None, Field(description="New action")] = None,
        tags: Annotated[list[str] | None, Field(description="Tag list (replaces the current tags)")] = None,
    ) -> dict[str, Any]:
        """Update a job: enable/disable it, or change its schedule, name, action or tags."""
        jobs = self.table("jobs")
        cur = jobs.require(job_id, "Job")
        next_run = None
        if cron_expression is not None:
            _check_cron(cron_expression)
            next_run = _next_run(cron_expression, self.clock.now())  # refuses one that never fires
        changes: dict[str, Any] = {
            k: v
            for k, v in (("enabled", enabled), ("cron_expression", cron_expression), ("name", name),
                         ("action", action), ("tags", tags))
            if v is not None
        }
        if not changes:
            raise invalid("nothing to update: give enabled, cron_expression, name, action or tags")
        if next_run is not None:
            changes["next_run"] = next_run
        if enabled is not None and cur.get("status") in ("enabled", "disabled"):
            changes["status"] = "enabled" if enabled else "disabled"
        updated = dict(jobs.update(job_id, **changes))
        self.emit("updated_jobs", updated)
        return {"status": "updated", "job": updated}

    @tool("/scheduler/jobs/delete", write=True, audit="deleted_jobs")
    def scheduler_delete_job(self, job_id: _ID) -> dict[str, Any]:
        """Delete a scheduled job."""
        jobs = self.table("jobs")
        removed = dict(jobs.require(job_id, "Job"))
        jobs.delete(job_id)
        self.emit("deleted_jobs", removed)
        return {"status": "deleted", "job": removed}

    @tool("/scheduler/jobs/run", write=True, audit="runs")
    def scheduler_run_job(self, job_id: _ID) -> dict[str, Any]:
        """Trigger a job run now (manual re-run); the run is added to its execution history."""
        jobs = self.table("jobs")
        job = jobs.require(job_id, "Job")
        if not job.get("enabled", True):
            raise invalid(f"Job {job_id} is disabled; enable it with scheduler_update_job first")
        history = list(job.get("execution_history", []))
        outcome = str(job.get("manual_run_status") or job.get("last_status") or "success")
        run: dict[str, Any] = {"run_at": self.clock.now().isoformat(), "status": outcome, "trigger": "manual"}
        if outcome != "success":
            error = next((h.get("error") for h in history if isinstance(h, Mapping) and h.get("error")), None)
            error = error or job.get("error_message") or job.get("error")
            if error:
                run["error"] = error
        jobs.update(job_id, execution_history=[run, *history], last_run=run["run_at"], last_status=outcome)
        self.emit("runs", {"job_id": job_id, **run})
        return {"status": "completed", "job_id": job_id, "run": run}
