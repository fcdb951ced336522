from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define

if TYPE_CHECKING:
    from ..models.control_batch_decision_batch import ControlBatchDecisionBatch


T = TypeVar("T", bound="ControlBatchDecision")


@_attrs_define
class ControlBatchDecision:
    """A batch-wide decision

    Attributes:
        batch (ControlBatchDecisionBatch): Every event of the batch still running continues iff `cmp(reduce(register reg
            over them), value)`
    """

    batch: ControlBatchDecisionBatch

    def to_dict(self) -> dict[str, Any]:
        batch = self.batch.to_dict()

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "batch": batch,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.control_batch_decision_batch import ControlBatchDecisionBatch  # noqa: PLC0415

        d = dict(src_dict)
        batch = ControlBatchDecisionBatch.from_dict(d.pop("batch"))

        control_batch_decision = cls(
            batch=batch,
        )

        return control_batch_decision
