from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.gpu_amounts import GpuAmounts
    from ..models.gpu_shares import GpuShares


T = TypeVar("T", bound="PoolGpus")


@_attrs_define
class PoolGpus:
    """
    Attributes:
        free_gpus (float):
        held_gpus (GpuAmounts): An amount of GPU by what holds it.
        held_shares (GpuShares): Shares of GPU by what holds them.
        inventory (int): GPUs in the pool's inventory (zero for CPU profiles).
        kind (str): `real` (devices handed to pods through `CUDA_VISIBLE_DEVICES`) or
            `accounting-only` (GPUs that exist only in the books, for development
            and tests).
        shares_per_gpu (int):
    """

    free_gpus: float
    held_gpus: GpuAmounts
    held_shares: GpuShares
    inventory: int
    kind: str
    shares_per_gpu: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        free_gpus = self.free_gpus

        held_gpus = self.held_gpus.to_dict()

        held_shares = self.held_shares.to_dict()

        inventory = self.inventory

        kind = self.kind

        shares_per_gpu = self.shares_per_gpu

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "free_gpus": free_gpus,
                "held_gpus": held_gpus,
                "held_shares": held_shares,
                "inventory": inventory,
                "kind": kind,
                "shares_per_gpu": shares_per_gpu,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.gpu_amounts import GpuAmounts  # noqa: PLC0415
        from ..models.gpu_shares import GpuShares  # noqa: PLC0415

        d = dict(src_dict)
        free_gpus = d.pop("free_gpus")

        held_gpus = GpuAmounts.from_dict(d.pop("held_gpus"))

        held_shares = GpuShares.from_dict(d.pop("held_shares"))

        inventory = d.pop("inventory")

        kind = d.pop("kind")

        shares_per_gpu = d.pop("shares_per_gpu")

        pool_gpus = cls(
            free_gpus=free_gpus,
            held_gpus=held_gpus,
            held_shares=held_shares,
            inventory=inventory,
            kind=kind,
            shares_per_gpu=shares_per_gpu,
        )

        pool_gpus.additional_properties = d
        return pool_gpus

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
