from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

from ..models.control_cmp import ControlCmp
from ..models.control_reduce import ControlReduce

T = TypeVar("T", bound="ControlBatchDecisionBatch")


@_attrs_define
class ControlBatchDecisionBatch:
    """Every event of the batch still running continues iff `cmp(reduce(register reg over them), value)`

    Attributes:
        cmp (ControlCmp): Unsigned comparison: eq `==`, ne `!=`, lt `<`, le `<=`, gt `>`, ge `>=`
        reduce (ControlReduce): min, max, sum (wrapping mod 2^32), any (1 if some value is non-zero, else 0), all (1 if
            every value is non-zero, else 0)
        reg (int): Reduced register: a register index, below the policy's `registers` (at most 15)
        value (int):
    """

    cmp: ControlCmp
    reduce: ControlReduce
    reg: int
    value: int

    def to_dict(self) -> dict[str, Any]:
        cmp = self.cmp.value

        reduce = self.reduce.value

        reg = self.reg

        value = self.value

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "cmp": cmp,
                "reduce": reduce,
                "reg": reg,
                "value": value,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        cmp = ControlCmp(d.pop("cmp"))

        reduce = ControlReduce(d.pop("reduce"))

        reg = d.pop("reg")

        value = d.pop("value")

        control_batch_decision_batch = cls(
            cmp=cmp,
            reduce=reduce,
            reg=reg,
            value=value,
        )

        return control_batch_decision_batch
