from enum import StrEnum


class ControlReduce(StrEnum):
    ALL = "all"
    ANY = "any"
    MAX = "max"
    MIN = "min"
    SUM = "sum"

    def __str__(self) -> str:
        return str(self.value)
