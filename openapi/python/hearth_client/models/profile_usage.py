from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="ProfileUsage")


@_attrs_define
class ProfileUsage:
    """One profile's share of the usage.

    Attributes:
        gpu_seconds (float): GPU-seconds they held while running: run time times the profile's
            GPUs per pod times the job's pods. Zero for CPU profiles.
        job_seconds (float): Seconds the jobs ran (a gang counts once).
        jobs (int):
        profile (str):
    """

    gpu_seconds: float
    job_seconds: float
    jobs: int
    profile: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        gpu_seconds = self.gpu_seconds

        job_seconds = self.job_seconds

        jobs = self.jobs

        profile = self.profile

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "gpu_seconds": gpu_seconds,
                "job_seconds": job_seconds,
                "jobs": jobs,
                "profile": profile,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        gpu_seconds = d.pop("gpu_seconds")

        job_seconds = d.pop("job_seconds")

        jobs = d.pop("jobs")

        profile = d.pop("profile")

        profile_usage = cls(
            gpu_seconds=gpu_seconds,
            job_seconds=job_seconds,
            jobs=jobs,
            profile=profile,
        )

        profile_usage.additional_properties = d
        return profile_usage

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
