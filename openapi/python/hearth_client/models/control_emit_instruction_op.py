from enum import StrEnum


class ControlEmitInstructionOp(StrEnum):
    EMIT = "emit"

    def __str__(self) -> str:
        return str(self.value)
