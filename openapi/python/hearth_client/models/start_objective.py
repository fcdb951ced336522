from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

from ..models.start_class import StartClass

T = TypeVar("T", bound="StartObjective")


@_attrs_define
class StartObjective:
    """A start-latency objective: at least `percentile` of a pool's jobs start
    on a pod of `class`. The `firepool` policy chooses each caller's
    keep-alive to reach it at the least GPU time the callers' pauses allow:
    capacity goes where a caller's pauses make warm starts cheap.

        Attributes:
            class_ (StartClass): Where a job must start to count within a start-latency objective.
            percentile (float): The share of jobs, above 0 and below 1: 0.9 for a p90 objective.
    """

    class_: StartClass
    percentile: float

    def to_dict(self) -> dict[str, Any]:
        class_ = self.class_.value

        percentile = self.percentile

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "class": class_,
                "percentile": percentile,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        class_ = StartClass(d.pop("class"))

        percentile = d.pop("percentile")

        start_objective = cls(
            class_=class_,
            percentile=percentile,
        )

        return start_objective
