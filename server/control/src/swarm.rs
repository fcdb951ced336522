//! The generated agent swarm of the bench and the end-to-end tests: many
//! sessions, each emitting control events after exponential think times on a
//! few routes with skewed popularity, every event due `δ` after release.
//!
//! Generator: session s emits its first event at an Exp(mean think) time, then
//! emits events separated by `δ + Exp` gaps with mean `mean think` (at
//! least δ: a closed-loop client waits for an outcome, due within δ, before
//! its next event) until `duration_ns`;
//! each event picks route i with probability `weights[i] / Σ weights` and
//! random input words. The superposition is close to Poisson per route with
//! rate `sessions / think · weight`, so the expected number of events of
//! route i in a window δ is `sessions · δ / think · wᵢ`: with 100,000
//! sessions, 4 s think time, δ = 50 ms and weights 0.45/0.25/0.2/0.1 that is
//! 562, 312, 250 and 125 events against K = 256: one route that always
//! batches, one that mostly does, one at the edge and one that never can.

use hearth_cohort::SplitMix64;

use crate::driver::{Arrival, RouteKey};
use crate::policy::{MAX_INPUTS, Program};

/// Swarm parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// Active sessions.
    pub sessions: u64,
    /// Length of the generated log, ns.
    pub duration_ns: u64,
    /// Mean think time between a session's events, ns.
    pub mean_think_ns: f64,
    /// Launch window δ: deadline = release + δ.
    pub delta_ns: u64,
    /// Relative route popularity, one weight per route.
    pub weights: Vec<f64>,
    /// PRNG seed.
    pub seed: u64,
}

impl Default for Params {
    /// The bench's swarm: 100,000 sessions, 4 s of events, 4 s think time,
    /// δ = 50 ms, four routes 0.45/0.25/0.2/0.1.
    fn default() -> Self {
        Self {
            sessions: 100_000,
            duration_ns: 4_000_000_000,
            mean_think_ns: 4e9,
            delta_ns: 50_000_000,
            weights: vec![0.45, 0.25, 0.2, 0.1],
            seed: 2608,
        }
    }
}

/// The swarm's policy: four routes of an agent loop over 8 registers, chains
/// of up to 4 steps while the step counter stays small.
pub const POLICY: &str = r#"{
  "name": "swarm", "version": 1, "registers": 8, "inputs": 2, "max_steps": 4,
  "routes": [
    {"name": "plan", "body": [
      {"op": "mix", "dst": 0, "a": {"reg": 0}, "b": {"input": 0}},
      {"op": "add", "dst": 1, "a": {"reg": 1}, "b": {"imm": 1}},
      {"op": "and", "dst": 2, "a": {"reg": 0}, "b": {"imm": 3}},
      {"op": "select", "dst": 3, "cmp": "gt", "a": {"input": 1}, "b": {"reg": 3}, "then": {"input": 1}, "else": {"reg": 3}},
      {"op": "set_route", "route": "tool", "when": {"cmp": "eq", "a": {"reg": 2}, "b": {"imm": 0}}},
      {"op": "set_route", "route": "reflect", "when": {"cmp": "eq", "a": {"reg": 2}, "b": {"imm": 1}}}
    ]},
    {"name": "tool", "body": [
      {"op": "xor", "dst": 4, "a": {"reg": 4}, "b": {"input": 0}},
      {"op": "rotl", "dst": 4, "a": {"reg": 4}, "b": {"imm": 7}},
      {"op": "add_sat", "dst": 5, "a": {"reg": 5}, "b": {"input": 1}},
      {"op": "mix", "dst": 0, "a": {"reg": 0}, "b": {"reg": 4}},
      {"op": "add", "dst": 1, "a": {"reg": 1}, "b": {"imm": 1}},
      {"op": "set_route", "route": "plan"},
      {"op": "emit", "code": 1, "regs": [4, 5], "when": {"cmp": "lt", "a": {"reg": 0}, "b": {"imm": 268435456}}}
    ]},
    {"name": "reflect", "body": [
      {"op": "mul", "dst": 6, "a": {"reg": 6}, "b": {"imm": 2654435761}},
      {"op": "sub_sat", "dst": 3, "a": {"reg": 3}, "b": {"imm": 1}},
      {"op": "mix", "dst": 0, "a": {"reg": 0}, "b": {"reg": 6}},
      {"op": "add", "dst": 1, "a": {"reg": 1}, "b": {"imm": 1}},
      {"op": "set_route", "route": "answer", "when": {"cmp": "eq", "a": {"reg": 3}, "b": {"imm": 0}}}
    ]},
    {"name": "answer", "body": [
      {"op": "add", "dst": 7, "a": {"reg": 7}, "b": {"imm": 1}},
      {"op": "xor", "dst": 0, "a": {"reg": 0}, "b": {"reg": 7}},
      {"op": "set_route", "route": "plan"},
      {"op": "emit", "code": 2, "regs": [0, 7, 1]}
    ]}
  ],
  "decision": {"per_event": {"cmp": "lt", "a": {"reg": 1}, "b": {"imm": 4000000000}}}
}"#;

/// The compiled swarm policy.
///
/// # Panics
/// Never: [`POLICY`] is valid (tested).
pub fn policy() -> Program {
    Program::from_json(POLICY).expect("the swarm policy is valid")
}

/// Generates the swarm's arrivals, sorted by release (ties by session).
/// `routes[i]` is the key of the route with weight `params.weights[i]`.
///
/// # Panics
/// If `routes` is shorter than `params.weights` or the weights do not sum to a positive number.
pub fn generate(params: &Params, routes: &[RouteKey]) -> Vec<Arrival> {
    assert!(
        routes.len() >= params.weights.len(),
        "a route key per weight"
    );
    let total: f64 = params.weights.iter().sum();
    assert!(total > 0.0, "weights must sum to a positive number");
    let mut cumulative = Vec::with_capacity(params.weights.len());
    let mut acc = 0.0;
    for w in &params.weights {
        acc += w / total;
        cumulative.push(acc);
    }
    let mut rng = SplitMix64::new(params.seed);
    let rate = 1.0 / (params.mean_think_ns - params.delta_ns as f64).max(1.0);
    let mut out = Vec::new();
    for session in 0..params.sessions {
        let mut t = rng.exp(1.0 / params.mean_think_ns);
        while (t as u64) < params.duration_ns {
            let u = rng.unit();
            let i = cumulative
                .iter()
                .position(|&c| u < c)
                .unwrap_or(cumulative.len() - 1);
            let mut input = [0; MAX_INPUTS];
            input[0] = rng.next_u64() as u32;
            input[1] = rng.below(1000) as u32;
            let release_ns = t as u64;
            out.push(Arrival {
                release_ns,
                session,
                route: routes[i],
                input,
                deadline_ns: release_ns + params.delta_ns,
            });
            t += params.delta_ns as f64 + rng.exp(rate);
        }
    }
    out.sort_by_key(|a| (a.release_ns, a.session));
    out
}
