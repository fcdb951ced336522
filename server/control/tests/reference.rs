//! An independent, deliberately naive interpreter of the policy JSON types
//! (route names looked up by string, operands matched on every read, no
//! compiled form, no columns), and property tests that the CPU executor's
//! scalar and batch paths both equal it on random valid policies, states and
//! inputs.

// Written out by hand on purpose: the reference must not share the executor's helpers.
#![allow(clippy::implicit_saturating_sub, clippy::manual_rotate)]

use hearth_cohort::SplitMix64;
use hearth_control::policy::{Cmp, Cond, Decision, Instr, Operand, Reduce, Spec};
use hearth_control::random::{self, Shape};
use hearth_control::{Program, Task, cpu};

#[derive(Debug, Clone, PartialEq, Eq)]
struct Result_ {
    regs: Vec<u32>,
    route: String,
    effect: Option<(u32, Vec<u32>)>,
    steps: u32,
}

fn read(o: Operand, regs: &[u32], input: &[u32]) -> u32 {
    match o {
        Operand::Reg(i) => regs[i as usize],
        Operand::Input(i) => input[i as usize],
        Operand::Imm(v) => v,
    }
}

fn compare(cmp: Cmp, a: u32, b: u32) -> bool {
    match cmp {
        Cmp::Eq => a == b,
        Cmp::Ne => a != b,
        Cmp::Lt => a < b,
        Cmp::Le => a <= b,
        Cmp::Gt => a > b,
        Cmp::Ge => a >= b,
    }
}

fn holds(c: &Option<Cond>, regs: &[u32], input: &[u32]) -> bool {
    match c {
        None => true,
        Some(c) => compare(c.cmp, read(c.a, regs, input), read(c.b, regs, input)),
    }
}

fn mix(a: u32, b: u32) -> u32 {
    let mut h = a ^ b.wrapping_mul(0x9E37_79B9);
    h ^= h >> 16;
    h = h.wrapping_mul(0x85EB_CA6B);
    h ^= h >> 13;
    h = h.wrapping_mul(0xC2B2_AE35);
    h ^ (h >> 16)
}

/// One step: returns (next route, effect).
fn step(
    spec: &Spec,
    route: &str,
    regs: &mut [u32],
    input: &[u32],
) -> (String, Option<(u32, Vec<u32>)>) {
    let body = &spec.routes.iter().find(|r| r.name == route).unwrap().body;
    let mut next = route.to_owned();
    let mut effect = None;
    for ins in body {
        let rd = |o: &Operand, regs: &[u32]| read(*o, regs, input);
        match ins {
            Instr::Add { dst, a, b } => regs[*dst as usize] = rd(a, regs).wrapping_add(rd(b, regs)),
            Instr::Sub { dst, a, b } => regs[*dst as usize] = rd(a, regs).wrapping_sub(rd(b, regs)),
            Instr::Mul { dst, a, b } => regs[*dst as usize] = rd(a, regs).wrapping_mul(rd(b, regs)),
            Instr::AddSat { dst, a, b } => {
                let s = u64::from(rd(a, regs)) + u64::from(rd(b, regs));
                regs[*dst as usize] = s.min(u64::from(u32::MAX)) as u32;
            }
            Instr::SubSat { dst, a, b } => {
                let (x, y) = (rd(a, regs), rd(b, regs));
                regs[*dst as usize] = if x > y { x - y } else { 0 };
            }
            Instr::MulSat { dst, a, b } => {
                let p = u64::from(rd(a, regs)) * u64::from(rd(b, regs));
                regs[*dst as usize] = p.min(u64::from(u32::MAX)) as u32;
            }
            Instr::Xor { dst, a, b } => regs[*dst as usize] = rd(a, regs) ^ rd(b, regs),
            Instr::And { dst, a, b } => regs[*dst as usize] = rd(a, regs) & rd(b, regs),
            Instr::Or { dst, a, b } => regs[*dst as usize] = rd(a, regs) | rd(b, regs),
            Instr::Rotl { dst, a, b } => {
                let (x, n) = (rd(a, regs), rd(b, regs) % 32);
                regs[*dst as usize] = if n == 0 {
                    x
                } else {
                    (x << n) | (x >> (32 - n))
                };
            }
            Instr::Rotr { dst, a, b } => {
                let (x, n) = (rd(a, regs), rd(b, regs) % 32);
                regs[*dst as usize] = if n == 0 {
                    x
                } else {
                    (x >> n) | (x << (32 - n))
                };
            }
            Instr::Mix { dst, a, b } => regs[*dst as usize] = mix(rd(a, regs), rd(b, regs)),
            Instr::Select {
                dst,
                cmp,
                a,
                b,
                then,
                otherwise,
            } => {
                let v = if compare(*cmp, rd(a, regs), rd(b, regs)) {
                    rd(then, regs)
                } else {
                    rd(otherwise, regs)
                };
                regs[*dst as usize] = v;
            }
            Instr::SetRoute { route, when } => {
                if holds(when, regs, input) {
                    next = route.clone();
                }
            }
            Instr::Emit {
                code,
                regs: which,
                when,
            } => {
                if holds(when, regs, input) {
                    effect = Some((*code, which.iter().map(|&r| regs[r as usize]).collect()));
                }
            }
        }
    }
    (next, effect)
}

/// A batch, steps in lockstep, exactly as the policy docs define chains.
fn reference(spec: &Spec, batch: &[(String, Vec<u32>, Vec<u32>)]) -> Vec<Result_> {
    let mut res: Vec<Result_> = batch
        .iter()
        .map(|(route, regs, _)| Result_ {
            regs: regs.clone(),
            route: route.clone(),
            effect: None,
            steps: 0,
        })
        .collect();
    let mut alive = vec![true; batch.len()];
    let mut k = 0;
    while k < spec.max_steps && alive.iter().any(|a| *a) {
        k += 1;
        for i in 0..batch.len() {
            if alive[i] {
                let route = res[i].route.clone();
                let (next, effect) = step(spec, &route, &mut res[i].regs, &batch[i].2);
                res[i].route = next;
                res[i].steps = k;
                if effect.is_some() || k == spec.max_steps {
                    alive[i] = false;
                }
                res[i].effect = effect;
            }
        }
        match &spec.decision {
            None => {}
            Some(Decision::PerEvent(c)) => {
                for i in 0..batch.len() {
                    if alive[i] && !holds(&Some(*c), &res[i].regs, &batch[i].2) {
                        alive[i] = false;
                    }
                }
            }
            Some(Decision::Batch(b)) => {
                let vals: Vec<u32> = (0..batch.len())
                    .filter(|&i| alive[i])
                    .map(|i| res[i].regs[b.reg as usize])
                    .collect();
                let v = match b.reduce {
                    Reduce::Min => *vals.iter().min().unwrap_or(&u32::MAX),
                    Reduce::Max => *vals.iter().max().unwrap_or(&0),
                    Reduce::Sum => vals.iter().fold(0u32, |s, v| s.wrapping_add(*v)),
                    Reduce::Any => u32::from(vals.iter().any(|v| *v != 0)),
                    Reduce::All => u32::from(vals.iter().all(|v| *v != 0)),
                };
                if !compare(b.cmp, v, b.value) {
                    alive = vec![false; batch.len()];
                }
            }
        }
    }
    res
}

fn to_result(p: &Program, o: &hearth_control::Outcome) -> Result_ {
    Result_ {
        regs: o.state[..p.registers() as usize].to_vec(),
        route: p.routes()[o.route as usize].name().to_owned(),
        effect: o.effect.map(|e| (e.code, e.values().to_vec())),
        steps: o.steps,
    }
}

fn check_case(seed: u64, shape: Shape, max_batch: u64) {
    let mut rng = SplitMix64::new(seed);
    let program = random::program(&mut rng, shape);
    let n = 1 + rng.below(max_batch) as usize;
    let start = (rng.below(2) == 0).then(|| rng.below(program.routes().len() as u64) as u16);
    let tasks: Vec<Task> = random::tasks(&mut rng, &program, n, start);
    let regs = program.registers() as usize;
    let batch: Vec<_> = tasks
        .iter()
        .map(|t| {
            (
                program.routes()[t.route as usize].name().to_owned(),
                t.state[..regs].to_vec(),
                t.input[..program.inputs() as usize].to_vec(),
            )
        })
        .collect();
    let want = reference(program.spec(), &batch);
    let scalar = cpu::run_scalar(&program, &tasks);
    let vector = cpu::run_batch(&program, &tasks);
    let got_scalar: Vec<_> = scalar.iter().map(|o| to_result(&program, o)).collect();
    assert_eq!(got_scalar, want, "scalar vs reference, seed {seed}");
    assert_eq!(vector, scalar, "batch vs scalar, seed {seed}");
    // Registers past the schema are never touched.
    for (o, t) in vector.iter().zip(&tasks) {
        assert_eq!(o.state[regs..], t.state[regs..], "seed {seed}");
    }
}

#[test]
fn cpu_paths_equal_the_reference_on_random_policies() {
    for seed in 0..4000 {
        check_case(seed, Shape::default(), 48);
    }
}

#[test]
fn cpu_paths_equal_the_reference_on_long_bodies_and_chains() {
    let shape = Shape {
        max_routes: 32,
        max_body: 64,
        max_steps: 64,
    };
    for seed in 10_000..10_400 {
        check_case(seed, shape, 200);
    }
}

#[test]
fn generated_policies_round_trip_through_json() {
    let mut rng = SplitMix64::new(99);
    for _ in 0..500 {
        let spec = random::spec(&mut rng, Shape::default());
        let json = serde_json::to_string(&spec).unwrap();
        let back: Spec = serde_json::from_str(&json).unwrap();
        assert_eq!(back, spec);
        assert_eq!(
            Program::compile(back).unwrap(),
            Program::compile(spec).unwrap()
        );
    }
}

#[test]
fn the_reference_sees_chains_stop_on_effects() {
    // A sanity check of the interpreter itself on a hand-computed case.
    let p = Program::from_json(hearth_control::EXAMPLE_POLICY).unwrap();
    let mut state = [0; 16];
    state[3] = 1;
    let mut input = [0; 8];
    input[0] = 200;
    let out = cpu::run_scalar(
        &p,
        &[Task {
            route: 0,
            state,
            input,
        }],
    );
    // Step 1 (classify): r0 = 200 > 100 so r2 = 1 and the route becomes answer.
    // Step 2 (answer): r3 = 0, emit {9, [200, 0]} ends the chain; next route classify.
    assert_eq!(out[0].steps, 2);
    assert_eq!(out[0].route, 0);
    let e = out[0].effect.unwrap();
    assert_eq!((e.code, e.values()), (9, &[200, 0][..]));
}
