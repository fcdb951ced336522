from enum import StrEnum


class ControlCmp(StrEnum):
    EQ = "eq"
    GE = "ge"
    GT = "gt"
    LE = "le"
    LT = "lt"
    NE = "ne"

    def __str__(self) -> str:
        return str(self.value)
