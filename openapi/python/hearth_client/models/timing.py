from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="Timing")


@_attrs_define
class Timing:
    """Start-latency breakdown of a finished job, in milliseconds.

    Attributes:
        acquire_ms (float): From picking until the pod was ready to bind (zero for warm).
        bind_ms (float): Writing code, installing deps, setting topology.
        queued_ms (float): From acceptance until the scheduler picked a pod.
        run_ms (float): The job's own run time.
        total_ms (float): From acceptance to the final state.
    """

    acquire_ms: float
    bind_ms: float
    queued_ms: float
    run_ms: float
    total_ms: float
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        acquire_ms = self.acquire_ms

        bind_ms = self.bind_ms

        queued_ms = self.queued_ms

        run_ms = self.run_ms

        total_ms = self.total_ms

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "acquire_ms": acquire_ms,
                "bind_ms": bind_ms,
                "queued_ms": queued_ms,
                "run_ms": run_ms,
                "total_ms": total_ms,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        acquire_ms = d.pop("acquire_ms")

        bind_ms = d.pop("bind_ms")

        queued_ms = d.pop("queued_ms")

        run_ms = d.pop("run_ms")

        total_ms = d.pop("total_ms")

        timing = cls(
            acquire_ms=acquire_ms,
            bind_ms=bind_ms,
            queued_ms=queued_ms,
            run_ms=run_ms,
            total_ms=total_ms,
        )

        timing.additional_properties = d
        return timing

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
