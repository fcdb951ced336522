from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.gpu_sample_response import GpuSampleResponse
    from ..models.leader_response import LeaderResponse


T = TypeVar("T", bound="PoolHistoryResponse")


@_attrs_define
class PoolHistoryResponse:
    """
    Attributes:
        leader (LeaderResponse): Which replica schedules jobs and holds the pools.
        profile (str):
        samples (list[GpuSampleResponse]): Oldest first, at most an hour of them.
        step_s (float): Seconds between samples (`HEARTH_POOL_HISTORY_STEP_S`).
    """

    leader: LeaderResponse
    profile: str
    samples: list[GpuSampleResponse]
    step_s: float
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        leader = self.leader.to_dict()

        profile = self.profile

        samples = []
        for samples_item_data in self.samples:
            samples_item = samples_item_data.to_dict()
            samples.append(samples_item)

        step_s = self.step_s

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "leader": leader,
                "profile": profile,
                "samples": samples,
                "step_s": step_s,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.gpu_sample_response import GpuSampleResponse  # noqa: PLC0415
        from ..models.leader_response import LeaderResponse  # noqa: PLC0415

        d = dict(src_dict)
        leader = LeaderResponse.from_dict(d.pop("leader"))

        profile = d.pop("profile")

        samples = []
        _samples = d.pop("samples")
        for samples_item_data in _samples:
            samples_item = GpuSampleResponse.from_dict(samples_item_data)

            samples.append(samples_item)

        step_s = d.pop("step_s")

        pool_history_response = cls(
            leader=leader,
            profile=profile,
            samples=samples,
            step_s=step_s,
        )

        pool_history_response.additional_properties = d
        return pool_history_response

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
