from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.profile_usage import ProfileUsage
    from ..models.usage_response_by_source import UsageResponseBySource
    from ..models.usage_response_by_state import UsageResponseByState


T = TypeVar("T", bound="UsageResponse")


@_attrs_define
class UsageResponse:
    """A tenant's usage in a window.

    Attributes:
        by_source (UsageResponseBySource): Those that got pods by where the pods came from (`warm`, `standby`,
            `cold`); jobs that never got one are not counted here.
        by_state (UsageResponseByState): Those jobs by state (`queued`, ..., `cancelled`); states with none are absent.
        jobs (int): Jobs accepted in the window.
        profiles (list[ProfileUsage]): By profile, by name.
        since (datetime.datetime): The window's start: jobs accepted at or after it count.
        window_s (int):
    """

    by_source: UsageResponseBySource
    by_state: UsageResponseByState
    jobs: int
    profiles: list[ProfileUsage]
    since: datetime.datetime
    window_s: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        by_source = self.by_source.to_dict()

        by_state = self.by_state.to_dict()

        jobs = self.jobs

        profiles = []
        for profiles_item_data in self.profiles:
            profiles_item = profiles_item_data.to_dict()
            profiles.append(profiles_item)

        since = self.since.isoformat()

        window_s = self.window_s

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "by_source": by_source,
                "by_state": by_state,
                "jobs": jobs,
                "profiles": profiles,
                "since": since,
                "window_s": window_s,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.profile_usage import ProfileUsage  # noqa: PLC0415
        from ..models.usage_response_by_source import UsageResponseBySource  # noqa: PLC0415
        from ..models.usage_response_by_state import UsageResponseByState  # noqa: PLC0415

        d = dict(src_dict)
        by_source = UsageResponseBySource.from_dict(d.pop("by_source"))

        by_state = UsageResponseByState.from_dict(d.pop("by_state"))

        jobs = d.pop("jobs")

        profiles = []
        _profiles = d.pop("profiles")
        for profiles_item_data in _profiles:
            profiles_item = ProfileUsage.from_dict(profiles_item_data)

            profiles.append(profiles_item)

        since = datetime.datetime.fromisoformat(d.pop("since"))

        window_s = d.pop("window_s")

        usage_response = cls(
            by_source=by_source,
            by_state=by_state,
            jobs=jobs,
            profiles=profiles,
            since=since,
            window_s=window_s,
        )

        usage_response.additional_properties = d
        return usage_response

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
