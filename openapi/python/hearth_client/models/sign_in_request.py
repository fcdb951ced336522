from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="SignInRequest")


@_attrs_define
class SignInRequest:
    """Sign-in: the API key to open a session with.

    Attributes:
        api_key (str): An API key of the tenant (`hk_...`), unrevoked and unexpired.
    """

    api_key: str

    def to_dict(self) -> dict[str, Any]:
        api_key = self.api_key

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "api_key": api_key,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        api_key = d.pop("api_key")

        sign_in_request = cls(
            api_key=api_key,
        )

        return sign_in_request
