from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.mechanism_response import MechanismResponse
    from ..models.profile_response import ProfileResponse


T = TypeVar("T", bound="ListProfilesResponse")


@_attrs_define
class ListProfilesResponse:
    """
    Attributes:
        mechanisms (list[MechanismResponse]): Isolation mechanisms and whether the runtime has them on this host.
        profiles (list[ProfileResponse]):
        runtime (str):
    """

    mechanisms: list[MechanismResponse]
    profiles: list[ProfileResponse]
    runtime: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        mechanisms = []
        for mechanisms_item_data in self.mechanisms:
            mechanisms_item = mechanisms_item_data.to_dict()
            mechanisms.append(mechanisms_item)

        profiles = []
        for profiles_item_data in self.profiles:
            profiles_item = profiles_item_data.to_dict()
            profiles.append(profiles_item)

        runtime = self.runtime

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "mechanisms": mechanisms,
                "profiles": profiles,
                "runtime": runtime,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.mechanism_response import MechanismResponse  # noqa: PLC0415
        from ..models.profile_response import ProfileResponse  # noqa: PLC0415

        d = dict(src_dict)
        mechanisms = []
        _mechanisms = d.pop("mechanisms")
        for mechanisms_item_data in _mechanisms:
            mechanisms_item = MechanismResponse.from_dict(mechanisms_item_data)

            mechanisms.append(mechanisms_item)

        profiles = []
        _profiles = d.pop("profiles")
        for profiles_item_data in _profiles:
            profiles_item = ProfileResponse.from_dict(profiles_item_data)

            profiles.append(profiles_item)

        runtime = d.pop("runtime")

        list_profiles_response = cls(
            mechanisms=mechanisms,
            profiles=profiles,
            runtime=runtime,
        )

        list_profiles_response.additional_properties = d
        return list_profiles_response

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
