//! The CPU executor, the reference every other executor must equal bit for
//! bit: a scalar interpreter ([`run_scalar`]) and a vectorised batch path
//! ([`run_batch`]) over a structure of arrays, one column per register, so
//! each instruction is one tight loop over the batch that the compiler turns
//! into SIMD. Semantics (steps, chains, decisions) are defined in
//! [`crate::policy`]. Pure computation: no clock, no I/O.

use crate::policy::{Arg, BinOp, Cmp, Decide, Input, MAX_EFFECT_VALUES, Op, Program, Regs, Test};

/// One event's work: the route it starts on, its session's registers and its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Task {
    /// Index of the starting route in the program.
    pub route: u16,
    /// The session's registers before the event.
    pub state: Regs,
    /// The event's input, zero-padded.
    pub input: Input,
}

/// An effect descriptor produced by `emit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Effect {
    /// The `code` of the `emit`.
    pub code: u32,
    /// Number of meaningful `values`.
    pub len: u8,
    /// The listed registers at the moment of the `emit`; entries past `len` are 0.
    pub values: [u32; MAX_EFFECT_VALUES],
}

impl Effect {
    /// The meaningful values.
    pub fn values(&self) -> &[u32] {
        &self.values[..usize::from(self.len)]
    }
}

/// What an event's chain produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Registers after the last step.
    pub state: Regs,
    /// The session's next route (chosen by the last step).
    pub route: u16,
    /// The effect of the last step, if it emitted one (an effect ends the chain).
    pub effect: Option<Effect>,
    /// Steps run, `1..=max_steps`.
    pub steps: u32,
}

/// Runs one step of `route` in place and returns `(next route, effect)`.
pub fn step(
    program: &Program,
    route: u16,
    regs: &mut Regs,
    input: &Input,
) -> (u16, Option<Effect>) {
    let mut next = route;
    let mut effect = None;
    for op in &program.routes()[usize::from(route)].body {
        match *op {
            Op::Bin { op, dst, a, b } => {
                regs[usize::from(dst)] = op.apply(a.read(regs, input), b.read(regs, input));
            }
            Op::Select {
                dst,
                test,
                then,
                otherwise,
            } => {
                let v = if test.eval(regs, input) {
                    then
                } else {
                    otherwise
                };
                regs[usize::from(dst)] = v.read(regs, input);
            }
            Op::SetRoute { route, when } => {
                if when.is_none_or(|t| t.eval(regs, input)) {
                    next = route;
                }
            }
            Op::Emit {
                code,
                regs: which,
                len,
                when,
            } => {
                if when.is_none_or(|t| t.eval(regs, input)) {
                    let mut values = [0; MAX_EFFECT_VALUES];
                    for (v, &r) in values.iter_mut().zip(&which[..usize::from(len)]) {
                        *v = regs[usize::from(r)];
                    }
                    effect = Some(Effect { code, len, values });
                }
            }
        }
    }
    (next, effect)
}

/// Runs a batch one event at a time (the straightforward reference).
///
/// # Panics
/// If a task's route is not a route of `program`.
pub fn run_scalar(program: &Program, tasks: &[Task]) -> Vec<Outcome> {
    let mut out: Vec<Outcome> = tasks
        .iter()
        .map(|t| Outcome {
            state: t.state,
            route: t.route,
            effect: None,
            steps: 0,
        })
        .collect();
    let mut running: Vec<bool> = vec![true; tasks.len()];
    for k in 1..=program.max_steps() {
        for ((o, t), run) in out.iter_mut().zip(tasks).zip(&mut running) {
            if !*run {
                continue;
            }
            let (next, effect) = step(program, o.route, &mut o.state, &t.input);
            o.route = next;
            o.effect = effect;
            o.steps = k;
            *run = effect.is_none() && k < program.max_steps();
        }
        match program.decide {
            Decide::Always => {}
            Decide::PerEvent(test) => {
                for ((o, t), run) in out.iter().zip(tasks).zip(&mut running) {
                    *run = *run && test.eval(&o.state, &t.input);
                }
            }
            Decide::Batch {
                reduce,
                reg,
                cmp,
                value,
            } => {
                let v = reduce.apply(
                    out.iter()
                        .zip(&running)
                        .filter(|(_, r)| **r)
                        .map(|(o, _)| o.state[usize::from(reg)]),
                );
                if !cmp.eval(v, value) {
                    running.fill(false);
                }
            }
        }
        if !running.contains(&true) {
            break;
        }
    }
    out
}

/// Runs a batch over a structure of arrays; equal to [`run_scalar`] bit for bit.
///
/// Events run in lockstep, one step at a time. While all running events sit
/// on one route (always so for the first step of a batch of one route) each
/// instruction is a single loop over whole columns; after a divergence each
/// route's events are gathered into a dense scratch batch and scattered back.
///
/// # Panics
/// If a task's route is not a route of `program`.
pub fn run_batch(program: &Program, tasks: &[Task]) -> Vec<Outcome> {
    let n = tasks.len();
    let nregs = program.registers() as usize;
    let mut cols = Cols::new(nregs, program.inputs() as usize, n);
    for (i, t) in tasks.iter().enumerate() {
        for (r, col) in cols.regs.iter_mut().enumerate() {
            col[i] = t.state[r];
        }
        for (j, col) in cols.inputs.iter_mut().enumerate() {
            col[i] = t.input[j];
        }
    }
    let mut route: Vec<u16> = tasks.iter().map(|t| t.route).collect();
    let mut steps = vec![0u32; n];
    let mut running = vec![true; n];
    let mut effect: Vec<Option<Effect>> = vec![None; n];
    let mut scratch = Cols::new(nregs, program.inputs() as usize, 0);
    let mut idx: Vec<usize> = Vec::with_capacity(n);
    for k in 1..=program.max_steps() {
        let first = running.iter().position(|&r| r).map(|i| route[i]);
        let Some(first) = first else { break };
        let uniform = running.iter().zip(&route).all(|(&r, &ro)| r && ro == first);
        if uniform {
            cols.reset_step(&route);
            exec_dense(program, first, &mut cols, n);
            for i in 0..n {
                finish_step(
                    &cols,
                    i,
                    k,
                    program.max_steps(),
                    &mut route[i],
                    &mut effect[i],
                    &mut running[i],
                );
                steps[i] = k;
            }
        } else {
            let mut routes: Vec<u16> = route
                .iter()
                .zip(&running)
                .filter(|(_, r)| **r)
                .map(|(&ro, _)| ro)
                .collect();
            routes.sort_unstable();
            routes.dedup();
            // Group on the routes at the start of the step: an event that
            // moves to a later route must not run twice in one step.
            let at_start: Vec<Option<u16>> = route
                .iter()
                .zip(&running)
                .map(|(&ro, &r)| r.then_some(ro))
                .collect();
            for r in routes {
                idx.clear();
                idx.extend((0..n).filter(|&i| at_start[i] == Some(r)));
                let m = idx.len();
                scratch.gather(&cols, &idx);
                scratch.next[..m].fill(r);
                exec_dense(program, r, &mut scratch, m);
                for (j, &i) in idx.iter().enumerate() {
                    for (dst, src) in cols.regs.iter_mut().zip(&scratch.regs) {
                        dst[i] = src[j];
                    }
                    finish_step(
                        &scratch,
                        j,
                        k,
                        program.max_steps(),
                        &mut route[i],
                        &mut effect[i],
                        &mut running[i],
                    );
                    steps[i] = k;
                }
            }
        }
        match program.decide {
            Decide::Always => {}
            Decide::PerEvent(test) => {
                let mut mask = vec![false; n];
                test_lanes(
                    test,
                    &cols.regs,
                    &cols.inputs,
                    n,
                    &mut mask,
                    &mut Vec::new(),
                    &mut Vec::new(),
                );
                for (r, m) in running.iter_mut().zip(&mask) {
                    *r = *r && *m;
                }
            }
            Decide::Batch {
                reduce,
                reg,
                cmp,
                value,
            } => {
                let col = &cols.regs[usize::from(reg)];
                let v = reduce.apply(
                    col.iter()
                        .zip(&running)
                        .filter(|(_, r)| **r)
                        .map(|(&v, _)| v),
                );
                if !cmp.eval(v, value) {
                    running.fill(false);
                }
            }
        }
    }
    (0..n)
        .map(|i| {
            let mut state = [0; crate::policy::MAX_REGISTERS];
            for (r, col) in cols.regs.iter().enumerate() {
                state[r] = col[i];
            }
            Outcome {
                state,
                route: route[i],
                effect: effect[i],
                steps: steps[i],
            }
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
#[inline]
fn finish_step(
    c: &Cols,
    lane: usize,
    k: u32,
    max_steps: u32,
    route: &mut u16,
    effect: &mut Option<Effect>,
    running: &mut bool,
) {
    *route = c.next[lane];
    *effect = if c.emitted[lane] {
        let mut values = [0; MAX_EFFECT_VALUES];
        for (v, col) in values.iter_mut().zip(&c.eff_vals) {
            *v = col[lane];
        }
        Some(Effect {
            code: c.eff_code[lane],
            len: c.eff_len[lane],
            values,
        })
    } else {
        None
    };
    *running = effect.is_none() && k < max_steps;
}

/// Columns of a batch: registers, inputs and the per-step outputs.
#[derive(Debug)]
struct Cols {
    regs: Vec<Vec<u32>>,
    inputs: Vec<Vec<u32>>,
    next: Vec<u16>,
    emitted: Vec<bool>,
    eff_code: Vec<u32>,
    eff_len: Vec<u8>,
    eff_vals: [Vec<u32>; MAX_EFFECT_VALUES],
    ta: Vec<u32>,
    tb: Vec<u32>,
    tc: Vec<u32>,
    td: Vec<u32>,
    mask: Vec<bool>,
}

impl Cols {
    fn new(nregs: usize, ninputs: usize, n: usize) -> Self {
        Self {
            regs: vec![vec![0; n]; nregs],
            inputs: vec![vec![0; n]; ninputs],
            next: vec![0; n],
            emitted: vec![false; n],
            eff_code: vec![0; n],
            eff_len: vec![0; n],
            eff_vals: std::array::from_fn(|_| vec![0; n]),
            ta: vec![0; n],
            tb: vec![0; n],
            tc: vec![0; n],
            td: vec![0; n],
            mask: vec![false; n],
        }
    }

    fn reset_step(&mut self, route: &[u16]) {
        self.next.copy_from_slice(route);
        self.emitted.fill(false);
    }

    fn gather(&mut self, from: &Cols, idx: &[usize]) {
        let m = idx.len();
        let grow = |v: &mut Vec<u32>| v.resize(m.max(v.len()), 0);
        for (dst, src) in self.regs.iter_mut().zip(&from.regs) {
            grow(dst);
            for (d, &i) in dst.iter_mut().zip(idx) {
                *d = src[i];
            }
        }
        for (dst, src) in self.inputs.iter_mut().zip(&from.inputs) {
            grow(dst);
            for (d, &i) in dst.iter_mut().zip(idx) {
                *d = src[i];
            }
        }
        for v in self.eff_vals.iter_mut().chain([
            &mut self.eff_code,
            &mut self.ta,
            &mut self.tb,
            &mut self.tc,
            &mut self.td,
        ]) {
            grow(v);
        }
        self.next.resize(m.max(self.next.len()), 0);
        self.eff_len.resize(m.max(self.eff_len.len()), 0);
        self.mask.resize(m.max(self.mask.len()), false);
        self.emitted.resize(m.max(self.emitted.len()), false);
        self.emitted[..m].fill(false);
    }
}

fn load(arg: Arg, regs: &[Vec<u32>], inputs: &[Vec<u32>], m: usize, buf: &mut Vec<u32>) {
    buf.resize(m.max(buf.len()), 0);
    let buf = &mut buf[..m];
    match arg {
        Arg::Reg(r) => buf.copy_from_slice(&regs[usize::from(r)][..m]),
        Arg::Input(i) => buf.copy_from_slice(&inputs[usize::from(i)][..m]),
        Arg::Imm(v) => buf.fill(v),
    }
}

#[inline]
fn lanes(d: &mut [u32], a: &[u32], b: &[u32], f: impl Fn(u32, u32) -> u32) {
    for ((d, &a), &b) in d.iter_mut().zip(a).zip(b) {
        *d = f(a, b);
    }
}

#[inline]
fn cmp_lanes(mask: &mut [bool], a: &[u32], b: &[u32], f: impl Fn(u32, u32) -> bool) {
    for ((m, &a), &b) in mask.iter_mut().zip(a).zip(b) {
        *m = f(a, b);
    }
}

fn test_lanes(
    t: Test,
    regs: &[Vec<u32>],
    inputs: &[Vec<u32>],
    m: usize,
    mask: &mut [bool],
    ta: &mut Vec<u32>,
    tb: &mut Vec<u32>,
) {
    load(t.a, regs, inputs, m, ta);
    load(t.b, regs, inputs, m, tb);
    let (a, b, mask) = (&ta[..m], &tb[..m], &mut mask[..m]);
    match t.cmp {
        Cmp::Eq => cmp_lanes(mask, a, b, |a, b| a == b),
        Cmp::Ne => cmp_lanes(mask, a, b, |a, b| a != b),
        Cmp::Lt => cmp_lanes(mask, a, b, |a, b| a < b),
        Cmp::Le => cmp_lanes(mask, a, b, |a, b| a <= b),
        Cmp::Gt => cmp_lanes(mask, a, b, |a, b| a > b),
        Cmp::Ge => cmp_lanes(mask, a, b, |a, b| a >= b),
    }
}

/// Runs one step of `route` on lanes `0..m` of `c` (whose `next` and
/// `emitted` the caller has reset).
fn exec_dense(program: &Program, route: u16, c: &mut Cols, m: usize) {
    for op in &program.routes()[usize::from(route)].body {
        match *op {
            Op::Bin { op, dst, a, b } => {
                load(a, &c.regs, &c.inputs, m, &mut c.ta);
                load(b, &c.regs, &c.inputs, m, &mut c.tb);
                let (x, y) = (&c.ta[..m], &c.tb[..m]);
                let d = &mut c.regs[usize::from(dst)][..m];
                match op {
                    BinOp::Add => lanes(d, x, y, u32::wrapping_add),
                    BinOp::Sub => lanes(d, x, y, u32::wrapping_sub),
                    BinOp::Mul => lanes(d, x, y, u32::wrapping_mul),
                    BinOp::AddSat => lanes(d, x, y, u32::saturating_add),
                    BinOp::SubSat => lanes(d, x, y, u32::saturating_sub),
                    BinOp::MulSat => lanes(d, x, y, u32::saturating_mul),
                    BinOp::Xor => lanes(d, x, y, |a, b| a ^ b),
                    BinOp::And => lanes(d, x, y, |a, b| a & b),
                    BinOp::Or => lanes(d, x, y, |a, b| a | b),
                    BinOp::Rotl => lanes(d, x, y, |a, b| a.rotate_left(b & 31)),
                    BinOp::Rotr => lanes(d, x, y, |a, b| a.rotate_right(b & 31)),
                    BinOp::Mix => lanes(d, x, y, crate::policy::mix32),
                }
            }
            Op::Select {
                dst,
                test,
                then,
                otherwise,
            } => {
                test_lanes(
                    test,
                    &c.regs,
                    &c.inputs,
                    m,
                    &mut c.mask,
                    &mut c.ta,
                    &mut c.tb,
                );
                load(then, &c.regs, &c.inputs, m, &mut c.tc);
                load(otherwise, &c.regs, &c.inputs, m, &mut c.td);
                let d = &mut c.regs[usize::from(dst)][..m];
                for (((d, &k), &t), &e) in d
                    .iter_mut()
                    .zip(&c.mask[..m])
                    .zip(&c.tc[..m])
                    .zip(&c.td[..m])
                {
                    *d = if k { t } else { e };
                }
            }
            Op::SetRoute { route, when } => match when {
                None => c.next[..m].fill(route),
                Some(t) => {
                    test_lanes(t, &c.regs, &c.inputs, m, &mut c.mask, &mut c.ta, &mut c.tb);
                    for (n, &k) in c.next[..m].iter_mut().zip(&c.mask[..m]) {
                        if k {
                            *n = route;
                        }
                    }
                }
            },
            Op::Emit {
                code,
                regs,
                len,
                when,
            } => {
                match when {
                    None => c.mask[..m].fill(true),
                    Some(t) => {
                        test_lanes(t, &c.regs, &c.inputs, m, &mut c.mask, &mut c.ta, &mut c.tb)
                    }
                }
                for (j, vals) in c.eff_vals.iter_mut().enumerate() {
                    let src = (j < usize::from(len)).then(|| &c.regs[usize::from(regs[j])]);
                    for i in 0..m {
                        if c.mask[i] {
                            vals[i] = src.map_or(0, |s| s[i]);
                        }
                    }
                }
                for i in 0..m {
                    if c.mask[i] {
                        c.emitted[i] = true;
                        c.eff_code[i] = code;
                        c.eff_len[i] = len;
                    }
                }
            }
        }
    }
}
