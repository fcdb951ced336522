from enum import StrEnum


class ControlSelectInstructionOp(StrEnum):
    SELECT = "select"

    def __str__(self) -> str:
        return str(self.value)
