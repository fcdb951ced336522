from enum import StrEnum


class ControlSetRouteInstructionOp(StrEnum):
    SET_ROUTE = "set_route"

    def __str__(self) -> str:
        return str(self.value)
