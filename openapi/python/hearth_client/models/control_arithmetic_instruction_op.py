from enum import StrEnum


class ControlArithmeticInstructionOp(StrEnum):
    ADD = "add"
    ADD_SAT = "add_sat"
    AND = "and"
    MIX = "mix"
    MUL = "mul"
    MUL_SAT = "mul_sat"
    OR = "or"
    ROTL = "rotl"
    ROTR = "rotr"
    SUB = "sub"
    SUB_SAT = "sub_sat"
    XOR = "xor"

    def __str__(self) -> str:
        return str(self.value)
