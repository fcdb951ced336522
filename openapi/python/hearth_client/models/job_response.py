from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.kind import Kind
from ..models.source import Source
from ..models.state import State
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.job_error import JobError
    from ..models.timing import Timing


T = TypeVar("T", bound="JobResponse")


@_attrs_define
class JobResponse:
    """A job.

    Attributes:
        attempts (int): How many times the job was given pods.
        caller (str):
        created_at (datetime.datetime):
        id (UUID):
        kind (Kind): What a job is for. The kinds run the same way; they are kept apart for
            accounting, filtering and policy.
        pods (list[str]): Pods the job ran on, in rank order.
        priority (int):
        profile (str):
        state (State): A job's lifecycle: `queued -> assigned -> running -> succeeded | failed |
            timed_out | cancelled`. A job may also be cancelled or failed before it
            runs, and goes back to `queued` when its pods are lost while it has
            attempts left. The service moves a job along these transitions only.
        stderr (str):
        stderr_truncated (bool):
        stdout (str): Head of stdout (full logs at `/v1/jobs/{id}/logs`).
        stdout_truncated (bool): Whether output was cut (here or in the full logs).
        timing (Timing): Start-latency breakdown of a finished job, in milliseconds.
        error (JobError | None | Unset):
        exit_code (int | None | Unset): Exit code of the command (rank 0's, or the first non-zero of a gang).
        finished_at (datetime.datetime | None | Unset):
        output (Any | Unset): The JSON the job wrote to `$HEARTH_OUTPUT`; null if none.
        source (None | Source | Unset):
        started_at (datetime.datetime | None | Unset):
    """

    attempts: int
    caller: str
    created_at: datetime.datetime
    id: UUID
    kind: Kind
    pods: list[str]
    priority: int
    profile: str
    state: State
    stderr: str
    stderr_truncated: bool
    stdout: str
    stdout_truncated: bool
    timing: Timing
    error: JobError | None | Unset = UNSET
    exit_code: int | None | Unset = UNSET
    finished_at: datetime.datetime | None | Unset = UNSET
    output: Any | Unset = UNSET
    source: None | Source | Unset = UNSET
    started_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.job_error import JobError  # noqa: PLC0415

        attempts = self.attempts

        caller = self.caller

        created_at = self.created_at.isoformat()

        id = str(self.id)

        kind = self.kind.value

        pods = self.pods

        priority = self.priority

        profile = self.profile

        state = self.state.value

        stderr = self.stderr

        stderr_truncated = self.stderr_truncated

        stdout = self.stdout

        stdout_truncated = self.stdout_truncated

        timing = self.timing.to_dict()

        error: dict[str, Any] | None | Unset
        if isinstance(self.error, Unset):
            error = UNSET
        elif isinstance(self.error, JobError):
            error = self.error.to_dict()
        else:
            error = self.error

        exit_code: int | None | Unset
        if isinstance(self.exit_code, Unset):
            exit_code = UNSET
        else:
            exit_code = self.exit_code

        finished_at: None | str | Unset
        if isinstance(self.finished_at, Unset):
            finished_at = UNSET
        elif isinstance(self.finished_at, datetime.datetime):
            finished_at = self.finished_at.isoformat()
        else:
            finished_at = self.finished_at

        output = self.output

        source: None | str | Unset
        if isinstance(self.source, Unset):
            source = UNSET
        elif isinstance(self.source, Source):
            source = self.source.value
        else:
            source = self.source

        started_at: None | str | Unset
        if isinstance(self.started_at, Unset):
            started_at = UNSET
        elif isinstance(self.started_at, datetime.datetime):
            started_at = self.started_at.isoformat()
        else:
            started_at = self.started_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "attempts": attempts,
                "caller": caller,
                "created_at": created_at,
                "id": id,
                "kind": kind,
                "pods": pods,
                "priority": priority,
                "profile": profile,
                "state": state,
                "stderr": stderr,
                "stderr_truncated": stderr_truncated,
                "stdout": stdout,
                "stdout_truncated": stdout_truncated,
                "timing": timing,
            }
        )
        if error is not UNSET:
            field_dict["error"] = error
        if exit_code is not UNSET:
            field_dict["exit_code"] = exit_code
        if finished_at is not UNSET:
            field_dict["finished_at"] = finished_at
        if output is not UNSET:
            field_dict["output"] = output
        if source is not UNSET:
            field_dict["source"] = source
        if started_at is not UNSET:
            field_dict["started_at"] = started_at

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.job_error import JobError  # noqa: PLC0415
        from ..models.timing import Timing  # noqa: PLC0415

        d = dict(src_dict)
        attempts = d.pop("attempts")

        caller = d.pop("caller")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        id = UUID(d.pop("id"))

        kind = Kind(d.pop("kind"))

        pods = cast(list[str], d.pop("pods"))

        priority = d.pop("priority")

        profile = d.pop("profile")

        state = State(d.pop("state"))

        stderr = d.pop("stderr")

        stderr_truncated = d.pop("stderr_truncated")

        stdout = d.pop("stdout")

        stdout_truncated = d.pop("stdout_truncated")

        timing = Timing.from_dict(d.pop("timing"))

        def _parse_error(data: object) -> JobError | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                error_type_0 = JobError.from_dict(data)

                return error_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(JobError | None | Unset, data)

        error = _parse_error(d.pop("error", UNSET))

        def _parse_exit_code(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        exit_code = _parse_exit_code(d.pop("exit_code", UNSET))

        def _parse_finished_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                finished_at_type_0 = datetime.datetime.fromisoformat(data)

                return finished_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        finished_at = _parse_finished_at(d.pop("finished_at", UNSET))

        output = d.pop("output", UNSET)

        def _parse_source(data: object) -> None | Source | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                source_type_0 = Source(data)

                return source_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Source | Unset, data)

        source = _parse_source(d.pop("source", UNSET))

        def _parse_started_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                started_at_type_0 = datetime.datetime.fromisoformat(data)

                return started_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        started_at = _parse_started_at(d.pop("started_at", UNSET))

        job_response = cls(
            attempts=attempts,
            caller=caller,
            created_at=created_at,
            id=id,
            kind=kind,
            pods=pods,
            priority=priority,
            profile=profile,
            state=state,
            stderr=stderr,
            stderr_truncated=stderr_truncated,
            stdout=stdout,
            stdout_truncated=stdout_truncated,
            timing=timing,
            error=error,
            exit_code=exit_code,
            finished_at=finished_at,
            output=output,
            source=source,
            started_at=started_at,
        )

        job_response.additional_properties = d
        return job_response

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
