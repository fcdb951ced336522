from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.leader_response import LeaderResponse
    from ..models.pool_response import PoolResponse


T = TypeVar("T", bound="ListPoolsResponse")


@_attrs_define
class ListPoolsResponse:
    """
    Attributes:
        leader (LeaderResponse): Which replica schedules jobs and holds the pools.
        pools (list[PoolResponse]):
    """

    leader: LeaderResponse
    pools: list[PoolResponse]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        leader = self.leader.to_dict()

        pools = []
        for pools_item_data in self.pools:
            pools_item = pools_item_data.to_dict()
            pools.append(pools_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "leader": leader,
                "pools": pools,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.leader_response import LeaderResponse  # noqa: PLC0415
        from ..models.pool_response import PoolResponse  # noqa: PLC0415

        d = dict(src_dict)
        leader = LeaderResponse.from_dict(d.pop("leader"))

        pools = []
        _pools = d.pop("pools")
        for pools_item_data in _pools:
            pools_item = PoolResponse.from_dict(pools_item_data)

            pools.append(pools_item)

        list_pools_response = cls(
            leader=leader,
            pools=pools,
        )

        list_pools_response.additional_properties = d
        return list_pools_response

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
