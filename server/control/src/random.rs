//! Random valid policies, states and inputs, for property tests, the GPU
//! check and the benches. Deterministic from a seed ([`SplitMix64`]), so a
//! failing case is reproducible from its seed alone.

use hearth_cohort::SplitMix64;

use crate::cpu::Task;
use crate::policy::{
    BatchDecision, BinOp, Cmp, Cond, Decision, Instr, MAX_INPUTS, MAX_REGISTERS, Operand, Program,
    Reduce, RouteSpec, Spec,
};

/// Shape of the generated policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Most routes.
    pub max_routes: usize,
    /// Most instructions per body.
    pub max_body: usize,
    /// Most chain steps (H).
    pub max_steps: u32,
}

impl Default for Shape {
    fn default() -> Self {
        Self {
            max_routes: 4,
            max_body: 16,
            max_steps: 8,
        }
    }
}

const CMPS: [Cmp; 6] = [Cmp::Eq, Cmp::Ne, Cmp::Lt, Cmp::Le, Cmp::Gt, Cmp::Ge];
const REDUCES: [Reduce; 5] = [
    Reduce::Min,
    Reduce::Max,
    Reduce::Sum,
    Reduce::Any,
    Reduce::All,
];

fn pick<T: Copy>(rng: &mut SplitMix64, xs: &[T]) -> T {
    xs[rng.below(xs.len() as u64) as usize]
}

/// A value biased towards edge cases (0, 1, small, `u32::MAX`, high bits).
pub fn value(rng: &mut SplitMix64) -> u32 {
    match rng.below(8) {
        0 => 0,
        1 => 1,
        2 => u32::MAX - rng.below(3) as u32,
        3 => rng.below(32) as u32,
        4 => 1 << rng.below(32),
        5 => rng.below(1000) as u32,
        _ => rng.next_u64() as u32,
    }
}

fn operand(rng: &mut SplitMix64, regs: u32, inputs: u32) -> Operand {
    match rng.below(if inputs == 0 { 2 } else { 3 }) {
        0 => Operand::Reg(rng.below(u64::from(regs)) as u32),
        1 => Operand::Imm(value(rng)),
        _ => Operand::Input(rng.below(u64::from(inputs)) as u32),
    }
}

fn cond(rng: &mut SplitMix64, regs: u32, inputs: u32) -> Cond {
    Cond {
        cmp: pick(rng, &CMPS),
        a: operand(rng, regs, inputs),
        b: operand(rng, regs, inputs),
    }
}

/// A random valid policy.
pub fn spec(rng: &mut SplitMix64, shape: Shape) -> Spec {
    let registers = 1 + rng.below(MAX_REGISTERS as u64) as u32;
    let inputs = rng.below(MAX_INPUTS as u64 + 1) as u32;
    let nroutes = 1 + rng.below(shape.max_routes as u64) as usize;
    let names: Vec<String> = (0..nroutes).map(|i| format!("r{i}")).collect();
    let routes = names
        .iter()
        .map(|name| {
            let len = rng.below(shape.max_body as u64 + 1) as usize;
            let body = (0..len)
                .map(|_| match rng.below(10) {
                    0..=5 => Instr::from_binary(
                        pick(rng, &BinOp::ALL),
                        rng.below(u64::from(registers)) as u32,
                        operand(rng, registers, inputs),
                        operand(rng, registers, inputs),
                    ),
                    6 | 7 => Instr::Select {
                        dst: rng.below(u64::from(registers)) as u32,
                        cmp: pick(rng, &CMPS),
                        a: operand(rng, registers, inputs),
                        b: operand(rng, registers, inputs),
                        then: operand(rng, registers, inputs),
                        otherwise: operand(rng, registers, inputs),
                    },
                    8 => Instr::SetRoute {
                        route: names[rng.below(nroutes as u64) as usize].clone(),
                        when: (rng.below(3) > 0).then(|| cond(rng, registers, inputs)),
                    },
                    _ => Instr::Emit {
                        code: value(rng),
                        regs: (0..rng.below(5))
                            .map(|_| rng.below(u64::from(registers)) as u32)
                            .collect(),
                        when: (rng.below(4) > 0).then(|| cond(rng, registers, inputs)),
                    },
                })
                .collect();
            RouteSpec {
                name: name.clone(),
                body,
            }
        })
        .collect();
    let decision = match rng.below(3) {
        0 => None,
        1 => Some(Decision::PerEvent(cond(rng, registers, inputs))),
        _ => Some(Decision::Batch(BatchDecision {
            reduce: pick(rng, &REDUCES),
            reg: rng.below(u64::from(registers)) as u32,
            cmp: pick(rng, &CMPS),
            value: value(rng),
        })),
    };
    Spec {
        name: format!("p{}", rng.below(1000)),
        version: rng.below(5) as u32,
        registers,
        inputs,
        init: (0..rng.below(u64::from(registers) + 1))
            .map(|_| value(rng))
            .collect(),
        max_steps: 1 + rng.below(u64::from(shape.max_steps)) as u32,
        routes,
        decision,
        durability: crate::policy::Durability::default(),
    }
}

/// A random valid, compiled policy.
///
/// # Panics
/// Never for the shapes within the policy limits (the generator only emits valid policies).
pub fn program(rng: &mut SplitMix64, shape: Shape) -> Program {
    Program::compile(spec(rng, shape)).expect("generated policies are valid")
}

/// `n` random tasks for `program`; all start on `route` when given, else on random routes.
pub fn tasks(rng: &mut SplitMix64, program: &Program, n: usize, route: Option<u16>) -> Vec<Task> {
    let nroutes = program.routes().len() as u64;
    (0..n)
        .map(|_| {
            let mut state = [0; MAX_REGISTERS];
            for r in &mut state[..program.registers() as usize] {
                *r = value(rng);
            }
            let mut input = [0; MAX_INPUTS];
            for w in &mut input[..program.inputs() as usize] {
                *w = value(rng);
            }
            Task {
                route: route.unwrap_or_else(|| rng.below(nroutes) as u16),
                state,
                input,
            }
        })
        .collect()
}
