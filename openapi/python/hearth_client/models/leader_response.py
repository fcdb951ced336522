from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="LeaderResponse")


@_attrs_define
class LeaderResponse:
    """Which replica schedules jobs and holds the pools.

    Attributes:
        is_leader (bool): Whether the replica answering leads. When false, this replica holds
            no pods: the pool's pods, GPU shares held, budget, queue and callers
            read zero or empty here, and only the leader knows them.
        host (None | str | Unset): The leading replica's host name.
        replica_id (None | str | Unset): The leading replica's id (each `hearth serve` logs its own at start);
            `null` when no replica leads at this moment (a takeover under way).
    """

    is_leader: bool
    host: None | str | Unset = UNSET
    replica_id: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        is_leader = self.is_leader

        host: None | str | Unset
        if isinstance(self.host, Unset):
            host = UNSET
        else:
            host = self.host

        replica_id: None | str | Unset
        if isinstance(self.replica_id, Unset):
            replica_id = UNSET
        else:
            replica_id = self.replica_id

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "is_leader": is_leader,
            }
        )
        if host is not UNSET:
            field_dict["host"] = host
        if replica_id is not UNSET:
            field_dict["replica_id"] = replica_id

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        is_leader = d.pop("is_leader")

        def _parse_host(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        host = _parse_host(d.pop("host", UNSET))

        def _parse_replica_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        replica_id = _parse_replica_id(d.pop("replica_id", UNSET))

        leader_response = cls(
            is_leader=is_leader,
            host=host,
            replica_id=replica_id,
        )

        leader_response.additional_properties = d
        return leader_response

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
