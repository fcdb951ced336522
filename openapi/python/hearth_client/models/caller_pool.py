from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="CallerPool")


@_attrs_define
class CallerPool:
    """One of the requesting tenant's callers.

    Attributes:
        caller (str):
        in_flight (int):
        pauses (int): Pauses between its jobs the keep-alive is matched to.
        warm_pods (int):
        keep_alive_ms (int | None | Unset): How long its warm pod is kept after a job; `null` when warm pods are
            not kept or never expire.
    """

    caller: str
    in_flight: int
    pauses: int
    warm_pods: int
    keep_alive_ms: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        caller = self.caller

        in_flight = self.in_flight

        pauses = self.pauses

        warm_pods = self.warm_pods

        keep_alive_ms: int | None | Unset
        if isinstance(self.keep_alive_ms, Unset):
            keep_alive_ms = UNSET
        else:
            keep_alive_ms = self.keep_alive_ms

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "caller": caller,
                "in_flight": in_flight,
                "pauses": pauses,
                "warm_pods": warm_pods,
            }
        )
        if keep_alive_ms is not UNSET:
            field_dict["keep_alive_ms"] = keep_alive_ms

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        caller = d.pop("caller")

        in_flight = d.pop("in_flight")

        pauses = d.pop("pauses")

        warm_pods = d.pop("warm_pods")

        def _parse_keep_alive_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        keep_alive_ms = _parse_keep_alive_ms(d.pop("keep_alive_ms", UNSET))

        caller_pool = cls(
            caller=caller,
            in_flight=in_flight,
            pauses=pauses,
            warm_pods=warm_pods,
            keep_alive_ms=keep_alive_ms,
        )

        caller_pool.additional_properties = d
        return caller_pool

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
