//! The control policy language: serde types for the JSON a tenant registers
//! ([`Spec`]), validation with precise errors, and the compiled, immutable
//! form every executor runs ([`Program`]), including its canonical word
//! encoding (also the CUDA executor's input) and the executable route ids.
//!
//! This module only describes and checks policies; it executes nothing (see
//! [`crate::cpu`]) and stores nothing.
//!
//! # Semantics of one step
//!
//! A session holds `registers` u32 registers (`1..=16`); an event carries an
//! input of at most `inputs` u32 words (`0..=8`, missing words read 0). One
//! step of route `r` runs `r`'s body once, in order, over a copy of the
//! registers; every instruction sees the effects of the ones before it.
//! Operands are `{"reg": i}`, `{"input": i}` or `{"imm": u32}`.
//!
//! | op | effect |
//! |---|---|
//! | `add` `sub` `mul` | `dst = a ∘ b`, wrapping mod 2³² |
//! | `add_sat` `sub_sat` `mul_sat` | `dst = a ∘ b`, saturating at 0 and 2³²−1 |
//! | `xor` `and` `or` | bitwise |
//! | `rotl` `rotr` | rotate `a` by `b mod 32` bits |
//! | `mix` | `dst = fmix32(a ^ (b · 0x9E3779B9))`, murmur3's finaliser ([`mix32`]) |
//! | `select` | `dst = cmp(a, b) ? then : else` (unsigned compare) |
//! | `set_route` | the session's next route becomes `route`, if `when` holds (always when absent) |
//! | `emit` | if `when` holds, the step's effect becomes `{code, values: regs now}`; a later `emit` replaces it |
//!
//! `cmp` is one of `eq ne lt le gt ge`. Without a `set_route` that fires the
//! next route is the current one. The body is straight-line: there are no
//! jumps, so every step executes at most [`MAX_BODY`] instructions.
//!
//! # Chains and the decision
//!
//! An event runs a chain of at most `max_steps` (H, `1..=64`) steps without
//! any outside observation. Step k+1 runs on the route chosen by step k, with
//! the same input, if and only if all of:
//!
//! 1. `k < max_steps`;
//! 2. step k emitted no effect (an effect is an observation: the client must
//!    see it before the session moves on);
//! 3. the **decision** after step k says continue:
//!    * absent: always continue;
//!    * `{"per_event": {"cmp", "a", "b"}}`: `cmp(a, b)` on this event's
//!      registers after step k;
//!    * `{"batch": {"reduce", "reg", "cmp", "value"}}`: a reduction over the
//!      events of the batch still running after step k (condition 2 holds for
//!      them): `min`, `max`, `sum` (wrapping) of register `reg`, `any` (1 if
//!      some value is non-zero, else 0) or `all` (1 if every value is
//!      non-zero, else 0); every such event continues iff
//!      `cmp(reduction, value)`. The result therefore depends on which events
//!      share the batch; a batch of one reduces over that event alone.
//!
//! The event's outcome is the registers, route and effect after its last step
//! and the number of steps it ran.
//!
//! # Route ids
//!
//! A route's executable id is the lowercase hex SHA-256 of a domain tag, the
//! policy name, the route's index and name, and the policy's canonical
//! encoding ([`Program::words`]: state schema, version, every body and the
//! decision, since a chain may run any of them). Equal ids mean identical
//! behaviour; any change to the code, the schema or the version changes them.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Most registers of a session state.
pub const MAX_REGISTERS: usize = 16;
/// Most input words of an event.
pub const MAX_INPUTS: usize = 8;
/// Most instructions in one route body.
pub const MAX_BODY: usize = 64;
/// Most routes in a policy.
pub const MAX_ROUTES: usize = 32;
/// Most steps in a chain (H).
pub const MAX_STEPS: u32 = 64;
/// Most registers one `emit` reports.
pub const MAX_EFFECT_VALUES: usize = 4;
/// Longest policy or route name, in bytes.
pub const MAX_NAME: usize = 64;

/// A session's registers; only the first `registers` are used, the rest stay 0.
pub type Regs = [u32; MAX_REGISTERS];
/// An event's input, zero-padded.
pub type Input = [u32; MAX_INPUTS];

/// A control policy as registered (JSON). See the module docs for semantics.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// Policy name, `[A-Za-z0-9_.-]{1,64}`.
    pub name: String,
    /// Version; a new version is a new immutable policy with new route ids.
    pub version: u32,
    /// Number of u32 registers of the session state, `1..=16`.
    pub registers: u32,
    /// Number of u32 input words an event may carry, `0..=8`.
    #[serde(default)]
    pub inputs: u32,
    /// Initial registers of a new session (at most `registers` values; the rest 0).
    #[serde(default)]
    pub init: Vec<u32>,
    /// Longest chain of observation-free steps per event (H), `1..=64`.
    #[serde(default = "one")]
    pub max_steps: u32,
    /// Routes, at least one; names unique.
    pub routes: Vec<RouteSpec>,
    /// When a chain continues; absent: always (until an effect or H).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    /// When an event's result is acknowledged (see [`Durability`]). Not part
    /// of the executable code: it changes no route id.
    #[serde(default, skip_serializing_if = "Durability::is_commit")]
    pub durability: Durability,
}

fn one() -> u32 {
    1
}

/// When the service acknowledges an event of a policy: the contract on what
/// a crash may lose.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// An event is answered only once the session state it produced is
    /// committed to the store; the commits of everything one batch launch
    /// (and whatever else finished meanwhile) produced are grouped into one
    /// transaction, so the cost is per launch, not per event. A crash loses
    /// no acknowledged event.
    #[default]
    Commit,
    /// An event is answered as soon as it ran; session state is written on
    /// the service's snapshot cadence (`HEARTH_CONTROL_SNAPSHOT_S`) and at
    /// shutdown. A crash (kill -9, power loss) loses the acknowledged events
    /// of the last snapshot interval: their sessions restart from the last
    /// snapshot.
    Snapshot,
}

impl Durability {
    /// Whether this is the default, [`Durability::Commit`].
    pub fn is_commit(&self) -> bool {
        *self == Self::Commit
    }
}

impl Spec {
    /// Reads a policy from JSON, locating a shape error (an unknown op, a bad
    /// `cmp`, an out-of-range u32, a missing or unknown field) at its route
    /// and instruction: `route "classify" (routes[0]) instruction 2
    /// (routes[0].body[2]): unknown variant ...`.
    ///
    /// # Errors
    /// [`PolicyError::Json`] naming where the JSON departs from the schema.
    pub fn from_value(value: serde_json::Value) -> Result<Self, PolicyError> {
        match serde_json::from_value::<Spec>(value.clone()) {
            Ok(spec) => Ok(spec),
            Err(e) => Err(PolicyError::Json(
                locate(&value).unwrap_or_else(|| format!("policy: {e}")),
            )),
        }
    }
}

/// Where a policy's JSON first fails to parse, and why; `None` if no route,
/// instruction or decision fails on its own (the error is then top-level).
fn locate(value: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    if let Some(routes) = value.get("routes").and_then(Value::as_array) {
        for (i, r) in routes.iter().enumerate() {
            let name = r
                .get("name")
                .and_then(Value::as_str)
                .map_or_else(|| "without a name".to_owned(), |n| format!("{n:?}"));
            if let Some(body) = r.get("body").and_then(Value::as_array) {
                for (j, ins) in body.iter().enumerate() {
                    if let Err(e) = serde_json::from_value::<Instr>(ins.clone()) {
                        let op = ins
                            .get("op")
                            .and_then(Value::as_str)
                            .map(|op| format!(" `{op}`"))
                            .unwrap_or_default();
                        return Some(format!(
                            "route {name} (routes[{i}]) instruction {j}{op} \
                             (routes[{i}].body[{j}]): {e}"
                        ));
                    }
                }
            }
            if let Err(e) = serde_json::from_value::<RouteSpec>(r.clone()) {
                return Some(format!("route {name} (routes[{i}]): {e}"));
            }
        }
    }
    match value.get("decision") {
        Some(d) if !d.is_null() => serde_json::from_value::<Decision>(d.clone())
            .err()
            .map(|e| format!("decision: {e}")),
        _ => None,
    }
}

/// `route "r" instruction 3`, or `decision` for the decision (route "").
fn place(route: &str, at: usize) -> String {
    if route.is_empty() {
        "decision".to_owned()
    } else {
        format!("route {route:?} instruction {at}")
    }
}

/// One route: a name and a straight-line body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteSpec {
    /// Route name, unique in the policy, `[A-Za-z0-9_.-]{1,64}`.
    pub name: String,
    /// Instructions, at most [`MAX_BODY`].
    pub body: Vec<Instr>,
}

/// An instruction operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Operand {
    /// Register `i` (`i < registers`).
    Reg(u32),
    /// Input word `i` (`i < inputs`).
    Input(u32),
    /// A constant.
    Imm(u32),
}

/// An unsigned comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cmp {
    /// `a == b`
    Eq,
    /// `a != b`
    Ne,
    /// `a < b`
    Lt,
    /// `a <= b`
    Le,
    /// `a > b`
    Gt,
    /// `a >= b`
    Ge,
}

impl Cmp {
    /// Evaluates the comparison.
    pub fn eval(self, a: u32, b: u32) -> bool {
        match self {
            Self::Eq => a == b,
            Self::Ne => a != b,
            Self::Lt => a < b,
            Self::Le => a <= b,
            Self::Gt => a > b,
            Self::Ge => a >= b,
        }
    }

    fn code(self) -> u32 {
        match self {
            Self::Eq => 1,
            Self::Ne => 2,
            Self::Lt => 3,
            Self::Le => 4,
            Self::Gt => 5,
            Self::Ge => 6,
        }
    }
}

/// A condition `cmp(a, b)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cond {
    /// The comparison.
    pub cmp: Cmp,
    /// Left operand.
    pub a: Operand,
    /// Right operand.
    pub b: Operand,
}

/// A two-operand arithmetic or bitwise operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BinOp {
    /// Wrapping addition.
    Add,
    /// Wrapping subtraction.
    Sub,
    /// Wrapping multiplication.
    Mul,
    /// Saturating addition.
    AddSat,
    /// Saturating subtraction.
    SubSat,
    /// Saturating multiplication.
    MulSat,
    /// Bitwise xor.
    Xor,
    /// Bitwise and.
    And,
    /// Bitwise or.
    Or,
    /// Rotate left by `b mod 32`.
    Rotl,
    /// Rotate right by `b mod 32`.
    Rotr,
    /// [`mix32`].
    Mix,
}

impl BinOp {
    /// Every operation, in encoding order (opcode = index + 1).
    pub const ALL: [Self; 12] = [
        Self::Add,
        Self::Sub,
        Self::Mul,
        Self::AddSat,
        Self::SubSat,
        Self::MulSat,
        Self::Xor,
        Self::And,
        Self::Or,
        Self::Rotl,
        Self::Rotr,
        Self::Mix,
    ];

    /// Applies the operation.
    #[inline]
    pub fn apply(self, a: u32, b: u32) -> u32 {
        match self {
            Self::Add => a.wrapping_add(b),
            Self::Sub => a.wrapping_sub(b),
            Self::Mul => a.wrapping_mul(b),
            Self::AddSat => a.saturating_add(b),
            Self::SubSat => a.saturating_sub(b),
            Self::MulSat => a.saturating_mul(b),
            Self::Xor => a ^ b,
            Self::And => a & b,
            Self::Or => a | b,
            Self::Rotl => a.rotate_left(b & 31),
            Self::Rotr => a.rotate_right(b & 31),
            Self::Mix => mix32(a, b),
        }
    }

    fn opcode(self) -> u32 {
        Self::ALL.iter().position(|&op| op == self).unwrap_or(0) as u32 + 1
    }
}

/// The hash-mix: murmur3's 32-bit finaliser of `a ^ (b · 0x9E3779B9)`.
#[inline]
pub fn mix32(a: u32, b: u32) -> u32 {
    let mut h = a ^ b.wrapping_mul(0x9E37_79B9);
    h ^= h >> 16;
    h = h.wrapping_mul(0x85EB_CA6B);
    h ^= h >> 13;
    h = h.wrapping_mul(0xC2B2_AE35);
    h ^ (h >> 16)
}

/// One instruction of a route body, tagged by `op` in JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Instr {
    /// `dst = a + b` (wrapping).
    Add { dst: u32, a: Operand, b: Operand },
    /// `dst = a - b` (wrapping).
    Sub { dst: u32, a: Operand, b: Operand },
    /// `dst = a * b` (wrapping).
    Mul { dst: u32, a: Operand, b: Operand },
    /// `dst = a + b` (saturating).
    AddSat { dst: u32, a: Operand, b: Operand },
    /// `dst = a - b` (saturating at 0).
    SubSat { dst: u32, a: Operand, b: Operand },
    /// `dst = a * b` (saturating).
    MulSat { dst: u32, a: Operand, b: Operand },
    /// `dst = a ^ b`.
    Xor { dst: u32, a: Operand, b: Operand },
    /// `dst = a & b`.
    And { dst: u32, a: Operand, b: Operand },
    /// `dst = a | b`.
    Or { dst: u32, a: Operand, b: Operand },
    /// `dst = a.rotate_left(b % 32)`.
    Rotl { dst: u32, a: Operand, b: Operand },
    /// `dst = a.rotate_right(b % 32)`.
    Rotr { dst: u32, a: Operand, b: Operand },
    /// `dst = mix32(a, b)`.
    Mix { dst: u32, a: Operand, b: Operand },
    /// `dst = cmp(a, b) ? then : else`.
    Select {
        dst: u32,
        cmp: Cmp,
        a: Operand,
        b: Operand,
        then: Operand,
        #[serde(rename = "else")]
        otherwise: Operand,
    },
    /// Next route becomes `route` if `when` holds.
    SetRoute {
        route: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        when: Option<Cond>,
    },
    /// The step's effect becomes `{code, values of regs}` if `when` holds.
    Emit {
        code: u32,
        #[serde(default)]
        regs: Vec<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        when: Option<Cond>,
    },
}

impl Instr {
    /// The arithmetic form `(op, dst, a, b)` of a two-operand instruction.
    pub fn binary(&self) -> Option<(BinOp, u32, Operand, Operand)> {
        let (op, dst, a, b) = match *self {
            Self::Add { dst, a, b } => (BinOp::Add, dst, a, b),
            Self::Sub { dst, a, b } => (BinOp::Sub, dst, a, b),
            Self::Mul { dst, a, b } => (BinOp::Mul, dst, a, b),
            Self::AddSat { dst, a, b } => (BinOp::AddSat, dst, a, b),
            Self::SubSat { dst, a, b } => (BinOp::SubSat, dst, a, b),
            Self::MulSat { dst, a, b } => (BinOp::MulSat, dst, a, b),
            Self::Xor { dst, a, b } => (BinOp::Xor, dst, a, b),
            Self::And { dst, a, b } => (BinOp::And, dst, a, b),
            Self::Or { dst, a, b } => (BinOp::Or, dst, a, b),
            Self::Rotl { dst, a, b } => (BinOp::Rotl, dst, a, b),
            Self::Rotr { dst, a, b } => (BinOp::Rotr, dst, a, b),
            Self::Mix { dst, a, b } => (BinOp::Mix, dst, a, b),
            _ => return None,
        };
        Some((op, dst, a, b))
    }

    /// The two-operand instruction `dst = op(a, b)`.
    pub fn from_binary(op: BinOp, dst: u32, a: Operand, b: Operand) -> Self {
        match op {
            BinOp::Add => Self::Add { dst, a, b },
            BinOp::Sub => Self::Sub { dst, a, b },
            BinOp::Mul => Self::Mul { dst, a, b },
            BinOp::AddSat => Self::AddSat { dst, a, b },
            BinOp::SubSat => Self::SubSat { dst, a, b },
            BinOp::MulSat => Self::MulSat { dst, a, b },
            BinOp::Xor => Self::Xor { dst, a, b },
            BinOp::And => Self::And { dst, a, b },
            BinOp::Or => Self::Or { dst, a, b },
            BinOp::Rotl => Self::Rotl { dst, a, b },
            BinOp::Rotr => Self::Rotr { dst, a, b },
            BinOp::Mix => Self::Mix { dst, a, b },
        }
    }
}

/// When a chain continues after a step (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Decision {
    /// Each event continues iff the condition holds on its own registers.
    PerEvent(Cond),
    /// All running events of the batch continue iff `cmp(reduce(reg), value)`.
    Batch(BatchDecision),
}

/// A batch-wide decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchDecision {
    /// The reduction over the running events.
    pub reduce: Reduce,
    /// The register reduced.
    pub reg: u32,
    /// The comparison of the reduction with `value`.
    pub cmp: Cmp,
    /// The constant compared against.
    pub value: u32,
}

/// A reduction over the running events of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reduce {
    /// Smallest value (`u32::MAX` over no events, never used: an empty batch stops).
    Min,
    /// Largest value.
    Max,
    /// Wrapping sum.
    Sum,
    /// 1 if some value is non-zero, else 0.
    Any,
    /// 1 if every value is non-zero, else 0.
    All,
}

impl Reduce {
    /// Reduces `values`.
    pub fn apply(self, values: impl IntoIterator<Item = u32>) -> u32 {
        let mut it = values.into_iter();
        match self {
            Self::Min => it.fold(u32::MAX, u32::min),
            Self::Max => it.fold(0, u32::max),
            Self::Sum => it.fold(0, u32::wrapping_add),
            Self::Any => u32::from(it.any(|v| v != 0)),
            Self::All => u32::from(it.all(|v| v != 0)),
        }
    }

    fn code(self) -> u32 {
        match self {
            Self::Min => 1,
            Self::Max => 2,
            Self::Sum => 3,
            Self::Any => 4,
            Self::All => 5,
        }
    }
}

/// Why a policy was rejected. `route` and `at` locate the offending instruction.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// A policy or route name is empty, too long or has other characters than `[A-Za-z0-9_.-]`.
    #[error("{what} name {name:?} must be 1..={MAX_NAME} characters of [A-Za-z0-9_.-]")]
    BadName {
        /// `policy` or `route`.
        what: &'static str,
        /// The name given.
        name: String,
    },
    /// `registers` is outside `1..=16`.
    #[error("registers must be in 1..={MAX_REGISTERS}, got {0}")]
    Registers(u32),
    /// `inputs` is above 8.
    #[error("inputs must be in 0..={MAX_INPUTS}, got {0}")]
    Inputs(u32),
    /// `init` has more values than registers.
    #[error("init has {got} values but the state has {registers} registers")]
    Init {
        /// Values given.
        got: usize,
        /// Registers of the state.
        registers: u32,
    },
    /// `max_steps` is outside `1..=64`.
    #[error("max_steps must be in 1..={MAX_STEPS}, got {0}")]
    MaxSteps(u32),
    /// No routes, or more than [`MAX_ROUTES`].
    #[error("a policy needs 1..={MAX_ROUTES} routes, got {0}")]
    RouteCount(usize),
    /// Two routes share a name.
    #[error("route {0:?} is declared twice")]
    DuplicateRoute(String),
    /// A body longer than [`MAX_BODY`].
    #[error("route {route:?}: body has {len} instructions, at most {MAX_BODY} allowed")]
    BodyLength {
        /// Route name.
        route: String,
        /// Its length.
        len: usize,
    },
    /// A register index out of range.
    #[error(
        "{}: register {index} out of range (state has {registers})",
        place(route, *at)
    )]
    Register {
        /// Route name (empty for the decision).
        route: String,
        /// Instruction index (0 for the decision).
        at: usize,
        /// The index used.
        index: u32,
        /// Registers of the state.
        registers: u32,
    },
    /// An input index out of range.
    #[error("{}: input {index} out of range (events carry {inputs})", place(route, *at))]
    InputIndex {
        /// Route name (empty for the decision).
        route: String,
        /// Instruction index.
        at: usize,
        /// The index used.
        index: u32,
        /// Input words of an event.
        inputs: u32,
    },
    /// `set_route` names a route the policy does not declare.
    #[error("route {route:?} instruction {at}: set_route to unknown route {target:?}")]
    UnknownRoute {
        /// Route name.
        route: String,
        /// Instruction index.
        at: usize,
        /// The missing target.
        target: String,
    },
    /// `emit` reports more than [`MAX_EFFECT_VALUES`] registers.
    #[error(
        "route {route:?} instruction {at}: emit reports {len} registers, at most {MAX_EFFECT_VALUES}"
    )]
    EffectLength {
        /// Route name.
        route: String,
        /// Instruction index.
        at: usize,
        /// Registers listed.
        len: usize,
    },
    /// The JSON does not match the policy schema.
    #[error("policy JSON: {0}")]
    Json(String),
}

/// A validated operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arg {
    Reg(u8),
    Input(u8),
    Imm(u32),
}

impl Arg {
    #[inline]
    pub(crate) fn read(self, regs: &Regs, input: &Input) -> u32 {
        match self {
            Self::Reg(i) => regs[usize::from(i)],
            Self::Input(i) => input[usize::from(i)],
            Self::Imm(v) => v,
        }
    }

    fn words(self) -> [u32; 2] {
        match self {
            Self::Reg(i) => [0, u32::from(i)],
            Self::Input(i) => [1, u32::from(i)],
            Self::Imm(v) => [2, v],
        }
    }
}

/// A validated condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Test {
    pub(crate) cmp: Cmp,
    pub(crate) a: Arg,
    pub(crate) b: Arg,
}

impl Test {
    #[inline]
    pub(crate) fn eval(self, regs: &Regs, input: &Input) -> bool {
        self.cmp
            .eval(self.a.read(regs, input), self.b.read(regs, input))
    }
}

/// A validated instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Bin {
        op: BinOp,
        dst: u8,
        a: Arg,
        b: Arg,
    },
    Select {
        dst: u8,
        test: Test,
        then: Arg,
        otherwise: Arg,
    },
    SetRoute {
        route: u16,
        when: Option<Test>,
    },
    Emit {
        code: u32,
        regs: [u8; MAX_EFFECT_VALUES],
        len: u8,
        when: Option<Test>,
    },
}

/// A validated decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decide {
    Always,
    PerEvent(Test),
    Batch {
        reduce: Reduce,
        reg: u8,
        cmp: Cmp,
        value: u32,
    },
}

/// One compiled route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    name: String,
    id: String,
    pub(crate) body: Vec<Op>,
}

impl Route {
    /// The route's name in the policy.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The executable route id (64 lowercase hex digits).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Number of instructions.
    pub fn len(&self) -> usize {
        self.body.len()
    }

    /// Whether the body is empty.
    pub fn is_empty(&self) -> bool {
        self.body.is_empty()
    }
}

/// A validated, immutable policy, ready for every executor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    spec: Spec,
    registers: u32,
    inputs: u32,
    max_steps: u32,
    init: Regs,
    routes: Vec<Route>,
    pub(crate) decide: Decide,
    words: Vec<u32>,
}

/// Words of the encoding header (see [`Program::words`]).
pub const HEADER_WORDS: usize = 12;
/// Words per encoded instruction.
pub const INSTR_WORDS: usize = 12;
/// Magic number opening an encoding ("HCP1").
pub const MAGIC: u32 = 0x4843_5031;

impl Program {
    /// Parses and validates a JSON policy.
    ///
    /// # Errors
    /// [`PolicyError::Json`] for malformed JSON or unknown fields, otherwise as [`Program::compile`].
    pub fn from_json(json: &str) -> Result<Self, PolicyError> {
        let value: serde_json::Value =
            serde_json::from_str(json).map_err(|e| PolicyError::Json(e.to_string()))?;
        Self::compile(Spec::from_value(value)?)
    }

    /// Validates `spec` and compiles it.
    ///
    /// # Errors
    /// The first violation found, in declaration order.
    pub fn compile(spec: Spec) -> Result<Self, PolicyError> {
        check_name("policy", &spec.name)?;
        if spec.registers == 0 || spec.registers as usize > MAX_REGISTERS {
            return Err(PolicyError::Registers(spec.registers));
        }
        if spec.inputs as usize > MAX_INPUTS {
            return Err(PolicyError::Inputs(spec.inputs));
        }
        if spec.init.len() > spec.registers as usize {
            return Err(PolicyError::Init {
                got: spec.init.len(),
                registers: spec.registers,
            });
        }
        if spec.max_steps == 0 || spec.max_steps > MAX_STEPS {
            return Err(PolicyError::MaxSteps(spec.max_steps));
        }
        if spec.routes.is_empty() || spec.routes.len() > MAX_ROUTES {
            return Err(PolicyError::RouteCount(spec.routes.len()));
        }
        let mut index = HashMap::new();
        for (i, r) in spec.routes.iter().enumerate() {
            check_name("route", &r.name)?;
            if index.insert(r.name.as_str(), i as u16).is_some() {
                return Err(PolicyError::DuplicateRoute(r.name.clone()));
            }
        }
        let ctx = Ctx {
            registers: spec.registers,
            inputs: spec.inputs,
            index: &index,
        };
        let mut bodies = Vec::with_capacity(spec.routes.len());
        for r in &spec.routes {
            if r.body.len() > MAX_BODY {
                return Err(PolicyError::BodyLength {
                    route: r.name.clone(),
                    len: r.body.len(),
                });
            }
            let body = r
                .body
                .iter()
                .enumerate()
                .map(|(at, ins)| ctx.op(&r.name, at, ins))
                .collect::<Result<Vec<_>, _>>()?;
            bodies.push(body);
        }
        let decide = match spec.decision {
            None => Decide::Always,
            Some(Decision::PerEvent(c)) => Decide::PerEvent(ctx.test("", 0, c)?),
            Some(Decision::Batch(b)) => Decide::Batch {
                reduce: b.reduce,
                reg: ctx.reg("", 0, b.reg)?,
                cmp: b.cmp,
                value: b.value,
            },
        };
        let mut init = [0; MAX_REGISTERS];
        init[..spec.init.len()].copy_from_slice(&spec.init);
        let words = encode(&spec, &bodies, decide);
        let routes = spec
            .routes
            .iter()
            .zip(bodies)
            .enumerate()
            .map(|(i, (r, body))| Route {
                id: route_id(&spec.name, i, &r.name, &words),
                name: r.name.clone(),
                body,
            })
            .collect();
        Ok(Self {
            registers: spec.registers,
            inputs: spec.inputs,
            max_steps: spec.max_steps,
            init,
            routes,
            decide,
            words,
            spec,
        })
    }

    /// The policy as registered.
    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    /// Policy name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Policy version.
    pub fn version(&self) -> u32 {
        self.spec.version
    }

    /// When its events are acknowledged.
    pub fn durability(&self) -> Durability {
        self.spec.durability
    }

    /// Registers of the session state.
    pub fn registers(&self) -> u32 {
        self.registers
    }

    /// Input words an event may carry.
    pub fn inputs(&self) -> u32 {
        self.inputs
    }

    /// Longest chain (H).
    pub fn max_steps(&self) -> u32 {
        self.max_steps
    }

    /// The state of a new session.
    pub fn init(&self) -> Regs {
        self.init
    }

    /// The routes, in declaration order (route index = position).
    pub fn routes(&self) -> &[Route] {
        &self.routes
    }

    /// The index of the route named `name`.
    pub fn route_index(&self, name: &str) -> Option<u16> {
        self.routes
            .iter()
            .position(|r| r.name == name)
            .map(|i| i as u16)
    }

    /// The index of the route with executable id `id`.
    pub fn route_by_id(&self, id: &str) -> Option<u16> {
        self.routes
            .iter()
            .position(|r| r.id == id)
            .map(|i| i as u16)
    }

    /// Whether the decision is a batch-wide reduction (results depend on batch composition).
    pub fn batch_decision(&self) -> bool {
        matches!(self.decide, Decide::Batch { .. })
    }

    /// A zero-padded input from `words`.
    ///
    /// # Errors
    /// [`PolicyError::Inputs`] if `words` is longer than [`Program::inputs`].
    pub fn input(&self, words: &[u32]) -> Result<Input, PolicyError> {
        if words.len() > self.inputs as usize {
            return Err(PolicyError::Inputs(words.len() as u32));
        }
        let mut input = [0; MAX_INPUTS];
        input[..words.len()].copy_from_slice(words);
        Ok(input)
    }

    /// The same policy with another H (a new version of the code, so new route ids).
    ///
    /// # Errors
    /// [`PolicyError::MaxSteps`] if `h` is outside `1..=64`.
    pub fn with_max_steps(&self, h: u32) -> Result<Self, PolicyError> {
        let mut spec = self.spec.clone();
        spec.max_steps = h;
        Self::compile(spec)
    }

    /// The canonical encoding, also what the CUDA executor interprets.
    ///
    /// Layout (all u32): header `[MAGIC, version, registers, inputs, routes R,
    /// max_steps, decision kind (0 always, 1 per event, 2 batch), d0, d1, d2,
    /// d3, d4]`; then R pairs `(first instruction, length)`; then
    /// [`INSTR_WORDS`] words per instruction `[opcode, x, cmp, a.kind, a.val,
    /// b.kind, b.val, c.kind, c.val, d.kind, d.val, 0]`. Operand kinds: 0
    /// register, 1 input, 2 immediate. Comparisons: 0 always, 1 eq, 2 ne, 3
    /// lt, 4 le, 5 gt, 6 ge. Opcodes: 1..=12 the [`BinOp::ALL`] operations
    /// (x = dst, a, b), 20 select (x = dst, cmp(a, b) ? c : d), 21 set_route
    /// (x = target route, if cmp(a, b)), 22 emit (x = code, if cmp(a, b),
    /// c.kind = value count, c.val = register indices packed 8 bits each,
    /// lowest first). Decision per event: `d = [cmp, a.kind, a.val, b.kind,
    /// b.val]`; batch: `d = [reduce (1 min, 2 max, 3 sum, 4 any, 5 all), reg,
    /// cmp, value, 0]`.
    pub fn words(&self) -> &[u32] {
        &self.words
    }
}

struct Ctx<'a> {
    registers: u32,
    inputs: u32,
    index: &'a HashMap<&'a str, u16>,
}

impl Ctx<'_> {
    fn reg(&self, route: &str, at: usize, index: u32) -> Result<u8, PolicyError> {
        if index < self.registers {
            Ok(index as u8)
        } else {
            Err(PolicyError::Register {
                route: route.to_owned(),
                at,
                index,
                registers: self.registers,
            })
        }
    }

    fn arg(&self, route: &str, at: usize, o: Operand) -> Result<Arg, PolicyError> {
        match o {
            Operand::Reg(i) => self.reg(route, at, i).map(Arg::Reg),
            Operand::Input(i) if i < self.inputs => Ok(Arg::Input(i as u8)),
            Operand::Input(index) => Err(PolicyError::InputIndex {
                route: route.to_owned(),
                at,
                index,
                inputs: self.inputs,
            }),
            Operand::Imm(v) => Ok(Arg::Imm(v)),
        }
    }

    fn test(&self, route: &str, at: usize, c: Cond) -> Result<Test, PolicyError> {
        Ok(Test {
            cmp: c.cmp,
            a: self.arg(route, at, c.a)?,
            b: self.arg(route, at, c.b)?,
        })
    }

    fn op(&self, route: &str, at: usize, ins: &Instr) -> Result<Op, PolicyError> {
        if let Some((op, dst, a, b)) = ins.binary() {
            return Ok(Op::Bin {
                op,
                dst: self.reg(route, at, dst)?,
                a: self.arg(route, at, a)?,
                b: self.arg(route, at, b)?,
            });
        }
        Ok(match ins {
            Instr::Select {
                dst,
                cmp,
                a,
                b,
                then,
                otherwise,
            } => Op::Select {
                dst: self.reg(route, at, *dst)?,
                test: self.test(
                    route,
                    at,
                    Cond {
                        cmp: *cmp,
                        a: *a,
                        b: *b,
                    },
                )?,
                then: self.arg(route, at, *then)?,
                otherwise: self.arg(route, at, *otherwise)?,
            },
            Instr::SetRoute {
                route: target,
                when,
            } => Op::SetRoute {
                route: *self.index.get(target.as_str()).ok_or_else(|| {
                    PolicyError::UnknownRoute {
                        route: route.to_owned(),
                        at,
                        target: target.clone(),
                    }
                })?,
                when: when.map(|c| self.test(route, at, c)).transpose()?,
            },
            Instr::Emit { code, regs, when } => {
                if regs.len() > MAX_EFFECT_VALUES {
                    return Err(PolicyError::EffectLength {
                        route: route.to_owned(),
                        at,
                        len: regs.len(),
                    });
                }
                let mut packed = [0; MAX_EFFECT_VALUES];
                for (slot, &r) in packed.iter_mut().zip(regs) {
                    *slot = self.reg(route, at, r)?;
                }
                Op::Emit {
                    code: *code,
                    regs: packed,
                    len: regs.len() as u8,
                    when: when.map(|c| self.test(route, at, c)).transpose()?,
                }
            }
            _ => unreachable!("binary instructions are handled above"),
        })
    }
}

fn check_name(what: &'static str, name: &str) -> Result<(), PolicyError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(PolicyError::BadName {
            what,
            name: name.to_owned(),
        })
    }
}

fn test_words(t: Option<Test>) -> [u32; 5] {
    match t {
        None => [0; 5],
        Some(t) => {
            let [ak, av] = t.a.words();
            let [bk, bv] = t.b.words();
            [t.cmp.code(), ak, av, bk, bv]
        }
    }
}

fn encode(spec: &Spec, bodies: &[Vec<Op>], decide: Decide) -> Vec<u32> {
    let (kind, d) = match decide {
        Decide::Always => (0, [0; 5]),
        Decide::PerEvent(t) => (1, test_words(Some(t))),
        Decide::Batch {
            reduce,
            reg,
            cmp,
            value,
        } => (2, [reduce.code(), u32::from(reg), cmp.code(), value, 0]),
    };
    let mut w = vec![
        MAGIC,
        spec.version,
        spec.registers,
        spec.inputs,
        bodies.len() as u32,
        spec.max_steps,
        kind,
    ];
    w.extend_from_slice(&d);
    debug_assert_eq!(w.len(), HEADER_WORDS);
    let mut first = 0;
    for b in bodies {
        w.extend_from_slice(&[first, b.len() as u32]);
        first += b.len() as u32;
    }
    for op in bodies.iter().flatten() {
        let mut ins = [0u32; INSTR_WORDS];
        match *op {
            Op::Bin { op, dst, a, b } => {
                ins[0] = op.opcode();
                ins[1] = u32::from(dst);
                ins[3..5].copy_from_slice(&a.words());
                ins[5..7].copy_from_slice(&b.words());
            }
            Op::Select {
                dst,
                test,
                then,
                otherwise,
            } => {
                ins[0] = 20;
                ins[1] = u32::from(dst);
                ins[2..7].copy_from_slice(&test_words(Some(test)));
                ins[7..9].copy_from_slice(&then.words());
                ins[9..11].copy_from_slice(&otherwise.words());
            }
            Op::SetRoute { route, when } => {
                ins[0] = 21;
                ins[1] = u32::from(route);
                ins[2..7].copy_from_slice(&test_words(when));
            }
            Op::Emit {
                code,
                regs,
                len,
                when,
            } => {
                ins[0] = 22;
                ins[1] = code;
                ins[2..7].copy_from_slice(&test_words(when));
                ins[7] = u32::from(len);
                ins[8] = u32::from_le_bytes(regs);
            }
        }
        w.extend_from_slice(&ins);
    }
    w
}

fn route_id(policy: &str, index: usize, route: &str, words: &[u32]) -> String {
    let mut h = Sha256::new();
    h.update(b"hearth-control/route/v1\0");
    h.update((policy.len() as u32).to_le_bytes());
    h.update(policy.as_bytes());
    h.update((index as u32).to_le_bytes());
    h.update((route.len() as u32).to_le_bytes());
    h.update(route.as_bytes());
    for w in words {
        h.update(w.to_le_bytes());
    }
    let mut hex = String::with_capacity(64);
    for b in h.finalize() {
        let _ = write!(hex, "{b:02x}");
    }
    hex
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = crate::EXAMPLE_POLICY;

    #[test]
    fn example_compiles_with_stable_distinct_ids() {
        let p = Program::from_json(EXAMPLE).unwrap();
        assert_eq!(p.routes().len(), 2);
        let ids: Vec<_> = p.routes().iter().map(Route::id).collect();
        assert_eq!(ids[0].len(), 64);
        assert_ne!(ids[0], ids[1]);
        let again = Program::from_json(EXAMPLE).unwrap();
        assert_eq!(again.routes()[0].id(), ids[0]);
        assert_eq!(p.route_by_id(ids[1]), Some(1));
        assert_eq!(p.init()[3], 7);
        // Round trip through serde keeps the program identical.
        let json = serde_json::to_string(p.spec()).unwrap();
        assert_eq!(Program::from_json(&json).unwrap(), p);
    }

    #[test]
    fn ids_change_with_version_schema_and_body() {
        let p = Program::from_json(EXAMPLE).unwrap();
        let mut s = p.spec().clone();
        s.version += 1;
        assert_ne!(
            Program::compile(s).unwrap().routes()[0].id(),
            p.routes()[0].id()
        );
        let mut s = p.spec().clone();
        s.registers += 1;
        assert_ne!(
            Program::compile(s).unwrap().routes()[0].id(),
            p.routes()[0].id()
        );
        let mut s = p.spec().clone();
        s.routes[1].body.pop();
        // Route 0's id changes too: a chain from it can reach route 1.
        assert_ne!(
            Program::compile(s).unwrap().routes()[0].id(),
            p.routes()[0].id()
        );
        assert_ne!(
            p.with_max_steps(2).unwrap().routes()[0].id(),
            p.routes()[0].id()
        );
    }

    fn with(f: impl FnOnce(&mut Spec)) -> Result<Program, PolicyError> {
        let mut s: Spec = serde_json::from_str(EXAMPLE).unwrap();
        f(&mut s);
        Program::compile(s)
    }

    #[test]
    fn validation_errors_are_precise() {
        assert_eq!(with(|s| s.registers = 17), Err(PolicyError::Registers(17)));
        assert_eq!(with(|s| s.registers = 0), Err(PolicyError::Registers(0)));
        assert_eq!(with(|s| s.inputs = 9), Err(PolicyError::Inputs(9)));
        assert_eq!(with(|s| s.max_steps = 65), Err(PolicyError::MaxSteps(65)));
        assert_eq!(with(|s| s.max_steps = 0), Err(PolicyError::MaxSteps(0)));
        assert_eq!(
            with(|s| s.init = vec![0; 5]),
            Err(PolicyError::Init {
                got: 5,
                registers: 4
            })
        );
        assert_eq!(with(|s| s.routes.clear()), Err(PolicyError::RouteCount(0)));
        assert!(matches!(
            with(|s| s.name = "bad name".into()),
            Err(PolicyError::BadName { what: "policy", .. })
        ));
        assert_eq!(
            with(|s| s.routes[1].name = "classify".into()),
            Err(PolicyError::DuplicateRoute("classify".into()))
        );
        assert_eq!(
            with(|s| s.routes[0].body[0] = Instr::Add {
                dst: 4,
                a: Operand::Imm(1),
                b: Operand::Imm(1)
            }),
            Err(PolicyError::Register {
                route: "classify".into(),
                at: 0,
                index: 4,
                registers: 4
            })
        );
        assert_eq!(
            with(|s| s.routes[0].body[1] = Instr::Xor {
                dst: 0,
                a: Operand::Reg(0),
                b: Operand::Input(2)
            }),
            Err(PolicyError::InputIndex {
                route: "classify".into(),
                at: 1,
                index: 2,
                inputs: 2
            })
        );
        assert_eq!(
            with(|s| s.routes[1].body[2] = Instr::SetRoute {
                route: "nowhere".into(),
                when: None
            }),
            Err(PolicyError::UnknownRoute {
                route: "answer".into(),
                at: 2,
                target: "nowhere".into()
            })
        );
        assert_eq!(
            with(|s| s.routes[1].body[1] = Instr::Emit {
                code: 1,
                regs: vec![0; 5],
                when: None
            }),
            Err(PolicyError::EffectLength {
                route: "answer".into(),
                at: 1,
                len: 5
            })
        );
        assert_eq!(
            with(|s| s.routes[0].body = vec![
                Instr::Add {
                    dst: 0,
                    a: Operand::Imm(0),
                    b: Operand::Imm(0)
                };
                65
            ]),
            Err(PolicyError::BodyLength {
                route: "classify".into(),
                len: 65
            })
        );
        assert!(matches!(
            with(|s| s.decision = Some(Decision::Batch(BatchDecision {
                reduce: Reduce::Max,
                reg: 9,
                cmp: Cmp::Lt,
                value: 0
            }))),
            Err(PolicyError::Register { index: 9, .. })
        ));
    }

    #[test]
    fn json_rejects_unknown_ops_and_fields() {
        let bad_op = EXAMPLE.replace("\"sub_sat\"", "\"jump\"");
        assert!(matches!(
            Program::from_json(&bad_op),
            Err(PolicyError::Json(_))
        ));
        let bad_field = EXAMPLE.replace("\"else\"", "\"els\"");
        assert!(matches!(
            Program::from_json(&bad_field),
            Err(PolicyError::Json(_))
        ));
        let extra = EXAMPLE.replace("\"max_steps\": 8", "\"max_steps\": 8, \"loop\": true");
        assert!(matches!(
            Program::from_json(&extra),
            Err(PolicyError::Json(_))
        ));
    }

    fn json_error(json: &str) -> String {
        match Program::from_json(json) {
            Err(e @ PolicyError::Json(_)) => e.to_string(),
            other => panic!("expected a JSON error, got {other:?}"),
        }
    }

    #[test]
    fn json_errors_name_the_route_and_instruction() {
        let div = json_error(&EXAMPLE.replace("\"sub_sat\"", "\"div\""));
        assert!(
            div.contains("route \"answer\" (routes[1]) instruction 0 `div` (routes[1].body[0])")
                && div.contains("unknown variant `div`"),
            "{div}"
        );
        let cmp = json_error(&EXAMPLE.replace("\"cmp\": \"gt\"", "\"cmp\": \"bigger\""));
        assert!(
            cmp.contains("route \"classify\" (routes[0]) instruction 2 `select`"),
            "{cmp}"
        );
        let imm = json_error(&EXAMPLE.replace("{\"imm\": 100}", "{\"imm\": 4294967296}"));
        assert!(imm.contains("(routes[0].body[2])"), "{imm}");
        let decision = json_error(&EXAMPLE.replace("\"lt\"", "\"less\""));
        assert!(
            decision.starts_with("policy JSON: decision: "),
            "{decision}"
        );
        let top = json_error(&EXAMPLE.replace("\"max_steps\": 8", "\"max_steps\": -1"));
        assert!(top.starts_with("policy JSON: policy: "), "{top}");
        // Syntax errors keep serde's line and column.
        assert!(json_error("{\"name\": ").contains("line 1"));
        // Validation errors of the decision say so instead of an empty route.
        let mut spec: Spec = serde_json::from_str(EXAMPLE).unwrap();
        spec.decision = Some(Decision::Batch(BatchDecision {
            reduce: Reduce::Max,
            reg: 9,
            cmp: Cmp::Lt,
            value: 0,
        }));
        let e = Program::compile(spec).unwrap_err().to_string();
        assert!(e.starts_with("decision: register 9"), "{e}");
    }

    #[test]
    fn encoding_layout() {
        let p = Program::from_json(EXAMPLE).unwrap();
        let w = p.words();
        assert_eq!(&w[..7], &[MAGIC, 3, 4, 2, 2, 8, 1]);
        assert_eq!(&w[HEADER_WORDS..HEADER_WORDS + 4], &[0, 4, 4, 3]);
        assert_eq!(w.len(), HEADER_WORDS + 4 + 7 * INSTR_WORDS);
        let emit = &w[HEADER_WORDS + 4 + 5 * INSTR_WORDS..][..INSTR_WORDS];
        assert_eq!(emit[0], 22);
        assert_eq!(emit[1], 9);
        assert_eq!(emit[7], 2);
        assert_eq!(emit[8], 0x0300);
    }

    #[test]
    fn ops_and_mix() {
        assert_eq!(BinOp::SubSat.apply(1, 2), 0);
        assert_eq!(BinOp::AddSat.apply(u32::MAX, 2), u32::MAX);
        assert_eq!(BinOp::MulSat.apply(1 << 20, 1 << 20), u32::MAX);
        assert_eq!(BinOp::Sub.apply(1, 2), u32::MAX);
        assert_eq!(BinOp::Rotl.apply(1, 33), 2);
        assert_eq!(BinOp::Rotr.apply(1, 1), 1 << 31);
        assert_eq!(mix32(0, 0), 0);
        assert_ne!(mix32(1, 0), mix32(0, 1));
        assert_eq!(Reduce::All.apply([1, 2, 0]), 0);
        assert_eq!(Reduce::Sum.apply([u32::MAX, 2]), 1);
    }
}
