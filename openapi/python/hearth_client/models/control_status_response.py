from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="ControlStatusResponse")


@_attrs_define
class ControlStatusResponse:
    """The control engine's executor and settings.

    Attributes:
        default_deadline_ms (float):
        eager (bool): Whether batches launch as soon as `K_r` events are queued.
        executor (str): `cpu` or `gpu`.
        launch_cost_us (int):
        max_batch (int): B: most events per batch.
        max_deadline_ms (float):
        max_events (int):
        snapshot_s (float):
        status (str): Why: e.g. `gpu (NVIDIA H200)`, `cpu (no CUDA driver)`.
        default_k (int | None | Unset): `K_r` of uncalibrated routes (null: CPU path only). Unless
            `HEARTH_CONTROL_K` sets it, chosen from the executor: none on the CPU
            (batching buys nothing there), 256 on a GPU.
    """

    default_deadline_ms: float
    eager: bool
    executor: str
    launch_cost_us: int
    max_batch: int
    max_deadline_ms: float
    max_events: int
    snapshot_s: float
    status: str
    default_k: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        default_deadline_ms = self.default_deadline_ms

        eager = self.eager

        executor = self.executor

        launch_cost_us = self.launch_cost_us

        max_batch = self.max_batch

        max_deadline_ms = self.max_deadline_ms

        max_events = self.max_events

        snapshot_s = self.snapshot_s

        status = self.status

        default_k: int | None | Unset
        if isinstance(self.default_k, Unset):
            default_k = UNSET
        else:
            default_k = self.default_k

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "default_deadline_ms": default_deadline_ms,
                "eager": eager,
                "executor": executor,
                "launch_cost_us": launch_cost_us,
                "max_batch": max_batch,
                "max_deadline_ms": max_deadline_ms,
                "max_events": max_events,
                "snapshot_s": snapshot_s,
                "status": status,
            }
        )
        if default_k is not UNSET:
            field_dict["default_k"] = default_k

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        default_deadline_ms = d.pop("default_deadline_ms")

        eager = d.pop("eager")

        executor = d.pop("executor")

        launch_cost_us = d.pop("launch_cost_us")

        max_batch = d.pop("max_batch")

        max_deadline_ms = d.pop("max_deadline_ms")

        max_events = d.pop("max_events")

        snapshot_s = d.pop("snapshot_s")

        status = d.pop("status")

        def _parse_default_k(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        default_k = _parse_default_k(d.pop("default_k", UNSET))

        control_status_response = cls(
            default_deadline_ms=default_deadline_ms,
            eager=eager,
            executor=executor,
            launch_cost_us=launch_cost_us,
            max_batch=max_batch,
            max_deadline_ms=max_deadline_ms,
            max_events=max_events,
            snapshot_s=snapshot_s,
            status=status,
            default_k=default_k,
        )

        control_status_response.additional_properties = d
        return control_status_response

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
