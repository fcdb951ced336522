from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.start_class import StartClass
from ..types import UNSET, Unset

T = TypeVar("T", bound="PoolObjective")


@_attrs_define
class PoolObjective:
    """A pool's start-latency objective and where it stands: shared facts of
    the pool, over every tenant's jobs.

        Attributes:
            class_ (StartClass): Where a job must start to count within a start-latency objective.
            percentile (float): The share of jobs to start within `class`: 0.9 for p90.
            predicted (float): The share of jobs the callers' pauses predict within the class at the
                keep-alives chosen now.
            warm_share (float | None | Unset): The share of recent jobs (about the last 256, exponentially weighted)
                that started on their caller's warm pod; `null` before the first.
    """

    class_: StartClass
    percentile: float
    predicted: float
    warm_share: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        class_ = self.class_.value

        percentile = self.percentile

        predicted = self.predicted

        warm_share: float | None | Unset
        if isinstance(self.warm_share, Unset):
            warm_share = UNSET
        else:
            warm_share = self.warm_share

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "class": class_,
                "percentile": percentile,
                "predicted": predicted,
            }
        )
        if warm_share is not UNSET:
            field_dict["warm_share"] = warm_share

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        class_ = StartClass(d.pop("class"))

        percentile = d.pop("percentile")

        predicted = d.pop("predicted")

        def _parse_warm_share(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        warm_share = _parse_warm_share(d.pop("warm_share", UNSET))

        pool_objective = cls(
            class_=class_,
            percentile=percentile,
            predicted=predicted,
            warm_share=warm_share,
        )

        pool_objective.additional_properties = d
        return pool_objective

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
