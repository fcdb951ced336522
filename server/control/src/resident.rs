//! Host side of device-resident sessions, without CUDA: which session lives
//! in which row of the executor's session table, which rows a batch must
//! (re)upload, and the packed buffers exchanged with `kernels/control.cu`.
//! The CUDA executor drives it; keeping it here lets the bookkeeping and the
//! layouts be tested on any machine (against an emulation of the kernels'
//! data movement, see the tests).
//!
//! # Residency
//!
//! The executor keeps one row of [`MAX_REGISTERS`] words per session in
//! device memory. A batch names its sessions; a session's row is uploaded
//! only when the device does not already hold exactly the state the caller
//! passes (a new session, or one whose state changed elsewhere, e.g. on the
//! CPU path). After a batch the device rows hold the outcome states, and so
//! does this table's record of them. When the table is full it starts over:
//! every session is uploaded again on its next use.
//!
//! # Packed input (one host-to-device copy per batch)
//!
//! ```text
//! [n, d, 0, 0] slot[n] route[n] input[n * MAX_INPUTS] dirty_slot[d] dirty_row[d * MAX_REGISTERS]
//! ```
//!
//! # Packed output (one device-to-host copy per batch), per event
//!
//! ```text
//! regs[MAX_REGISTERS] route steps emitted code len value[MAX_EFFECT_VALUES]
//! ```

use std::collections::HashMap;

use crate::cpu::{Effect, Outcome, Task};
use crate::policy::{MAX_EFFECT_VALUES, MAX_INPUTS, MAX_REGISTERS, Regs};

/// Header words of the packed input.
pub const IN_HEADER: usize = 4;
/// Effect words per event in the packed output: emitted, code, len, values.
pub const EFFECT_WORDS: usize = 3 + MAX_EFFECT_VALUES;
/// Output words per event.
pub const OUT_WORDS: usize = MAX_REGISTERS + 2 + EFFECT_WORDS;
/// Default most session rows kept on the device (256 MiB of registers).
pub const DEFAULT_MAX_ROWS: u32 = 1 << 22;

/// Packed input words for a batch of `n` events with `d` rows to upload.
pub const fn input_words(n: usize, d: usize) -> usize {
    IN_HEADER + n * (2 + MAX_INPUTS) + d * (1 + MAX_REGISTERS)
}

#[derive(Debug, Clone, Copy)]
struct Row {
    slot: u32,
    /// What the device row holds.
    regs: Regs,
    /// The last batch that used it.
    batch: u64,
}

/// Which session is in which device row, and what the row holds.
#[derive(Debug, Clone)]
pub struct Residency {
    rows: HashMap<u64, Row>,
    next: u32,
    max_rows: u32,
    resets: u64,
    batch: u64,
}

/// What [`Residency::pack`] prepared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packed {
    /// Events.
    pub n: usize,
    /// Rows uploaded.
    pub dirty: usize,
    /// Device rows the batch needs (the table's high-water mark).
    pub rows: usize,
}

impl Residency {
    /// An empty table of at most `max_rows` rows (at least 1).
    pub fn new(max_rows: u32) -> Self {
        Self {
            rows: HashMap::new(),
            next: 0,
            max_rows: max_rows.max(1),
            resets: 0,
            batch: 0,
        }
    }

    /// Sessions with a device row.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether no session has a row.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Times the table was full and started over.
    pub fn resets(&self) -> u64 {
        self.resets
    }

    /// Forgets every row (after a device error, or to measure cold batches):
    /// every session is uploaded again on its next use.
    pub fn forget(&mut self) {
        self.rows.clear();
        self.next = 0;
    }

    /// Fills `buf` with the packed input of a batch (module docs): a row per
    /// session, uploaded where the device does not hold `tasks[i].state`.
    ///
    /// # Errors
    /// If the lengths differ, a session repeats (the table is then
    /// forgotten), or the batch has more sessions than the table has rows.
    pub fn pack(
        &mut self,
        sessions: &[u64],
        tasks: &[Task],
        buf: &mut Vec<u32>,
    ) -> Result<Packed, String> {
        if sessions.len() != tasks.len() {
            return Err(format!(
                "{} sessions for {} tasks",
                sessions.len(),
                tasks.len()
            ));
        }
        if tasks.len() > self.max_rows as usize {
            return Err(format!(
                "a batch of {} sessions exceeds the table's {} rows",
                tasks.len(),
                self.max_rows
            ));
        }
        let n = tasks.len();
        let free = (self.max_rows - self.next) as usize;
        let new = sessions
            .iter()
            .filter(|s| !self.rows.contains_key(s))
            .count();
        if new > free {
            self.forget();
            self.resets += 1;
        }
        self.batch += 1;
        let batch = self.batch;
        buf.clear();
        buf.extend_from_slice(&[n as u32, 0, 0, 0]);
        let mut dirty: Vec<(u32, Regs)> = Vec::new();
        for (&session, task) in sessions.iter().zip(tasks) {
            let next = &mut self.next;
            let row = self.rows.entry(session).or_insert_with(|| {
                let slot = *next;
                *next += 1;
                dirty.push((slot, task.state));
                Row {
                    slot,
                    regs: task.state,
                    batch: 0,
                }
            });
            if row.batch == batch {
                self.forget();
                return Err(format!("session {session} appears twice in a batch"));
            }
            row.batch = batch;
            if row.regs != task.state {
                row.regs = task.state;
                dirty.push((row.slot, task.state));
            }
            buf.push(row.slot);
        }
        buf.extend(tasks.iter().map(|t| u32::from(t.route)));
        for t in tasks {
            buf.extend_from_slice(&t.input);
        }
        buf[1] = dirty.len() as u32;
        buf.extend(dirty.iter().map(|&(slot, _)| slot));
        for (_, regs) in &dirty {
            buf.extend_from_slice(regs);
        }
        debug_assert_eq!(buf.len(), input_words(n, dirty.len()));
        Ok(Packed {
            n,
            dirty: dirty.len(),
            rows: self.next as usize,
        })
    }

    /// Records that the device rows of `sessions` now hold the outcomes' states.
    pub fn commit(&mut self, sessions: &[u64], outcomes: &[Outcome]) {
        for (s, o) in sessions.iter().zip(outcomes) {
            if let Some(row) = self.rows.get_mut(s) {
                row.regs = o.state;
            }
        }
    }
}

/// Decodes `n` events of a packed output (module docs).
///
/// # Panics
/// If `out` holds fewer than `n` events.
pub fn unpack(out: &[u32], n: usize) -> Vec<Outcome> {
    out[..n * OUT_WORDS]
        .chunks_exact(OUT_WORDS)
        .map(|o| {
            let mut state = [0; MAX_REGISTERS];
            state.copy_from_slice(&o[..MAX_REGISTERS]);
            let e = &o[MAX_REGISTERS + 2..];
            let mut values = [0; MAX_EFFECT_VALUES];
            values.copy_from_slice(&e[3..]);
            Outcome {
                state,
                route: o[MAX_REGISTERS] as u16,
                steps: o[MAX_REGISTERS + 1],
                effect: (e[0] != 0).then_some(Effect {
                    code: e[1],
                    len: e[2] as u8,
                    values,
                }),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu;
    use crate::policy::Program;
    use crate::random::{self, Shape};
    use hearth_cohort::SplitMix64;

    /// The kernels' data movement on the CPU: `control_begin` scatters the
    /// dirty rows into the table, the chain runs every event from its row
    /// (the reference semantics) and writes the row and the packed output.
    fn emulate(program: &Program, input: &[u32], table: &mut Vec<u32>, rows: usize) -> Vec<u32> {
        if table.len() < rows * MAX_REGISTERS {
            table.resize(rows * MAX_REGISTERS, 0xDEAD_BEEF);
        }
        let (n, d) = (input[0] as usize, input[1] as usize);
        let slot = &input[IN_HEADER..][..n];
        let route = &input[IN_HEADER + n..][..n];
        let inputs = &input[IN_HEADER + 2 * n..][..n * MAX_INPUTS];
        let dslot = &input[IN_HEADER + n * (2 + MAX_INPUTS)..][..d];
        let drows = &input[IN_HEADER + n * (2 + MAX_INPUTS) + d..][..d * MAX_REGISTERS];
        for (j, &s) in dslot.iter().enumerate() {
            table[s as usize * MAX_REGISTERS..][..MAX_REGISTERS]
                .copy_from_slice(&drows[j * MAX_REGISTERS..][..MAX_REGISTERS]);
        }
        let tasks: Vec<Task> = (0..n)
            .map(|i| {
                let mut state = [0; MAX_REGISTERS];
                state.copy_from_slice(&table[slot[i] as usize * MAX_REGISTERS..][..MAX_REGISTERS]);
                let mut input = [0; MAX_INPUTS];
                input.copy_from_slice(&inputs[i * MAX_INPUTS..][..MAX_INPUTS]);
                Task {
                    route: route[i] as u16,
                    state,
                    input,
                }
            })
            .collect();
        let mut out = vec![0; n * OUT_WORDS];
        for (i, o) in cpu::run_batch(program, &tasks).into_iter().enumerate() {
            table[slot[i] as usize * MAX_REGISTERS..][..MAX_REGISTERS].copy_from_slice(&o.state);
            let w = &mut out[i * OUT_WORDS..][..OUT_WORDS];
            w[..MAX_REGISTERS].copy_from_slice(&o.state);
            w[MAX_REGISTERS] = u32::from(o.route);
            w[MAX_REGISTERS + 1] = o.steps;
            if let Some(e) = o.effect {
                w[MAX_REGISTERS + 2] = 1;
                w[MAX_REGISTERS + 3] = e.code;
                w[MAX_REGISTERS + 4] = u32::from(e.len);
                w[MAX_REGISTERS + 5..].copy_from_slice(&e.values);
            }
        }
        out
    }

    #[test]
    fn resident_batches_equal_the_reference_and_upload_only_changed_rows() {
        let mut rng = SplitMix64::new(7);
        let program = random::program(&mut rng, Shape::default());
        let pool = 300u64;
        let mut states: HashMap<u64, Regs> = HashMap::new();
        let mut res = Residency::new(DEFAULT_MAX_ROWS);
        let (mut table, mut buf) = (Vec::new(), Vec::new());
        let mut uploads = 0;
        for round in 0..60 {
            let n = 1 + rng.below(120) as usize;
            let mut sessions: Vec<u64> = Vec::new();
            while sessions.len() < n {
                let s = rng.below(pool);
                if !sessions.contains(&s) {
                    sessions.push(s);
                }
            }
            // Now and then a session's state changes off the device.
            if round % 7 == 3 {
                for s in sessions.iter().step_by(5) {
                    if let Some(st) = states.get_mut(s) {
                        st[0] ^= 0x5555;
                    }
                }
            }
            let mut tasks = random::tasks(&mut rng, &program, n, None);
            for (t, s) in tasks.iter_mut().zip(&sessions) {
                t.state = *states.entry(*s).or_insert(t.state);
            }
            let packed = res.pack(&sessions, &tasks, &mut buf).unwrap();
            assert_eq!(buf.len(), input_words(n, packed.dirty));
            uploads += packed.dirty;
            let out = emulate(&program, &buf, &mut table, packed.rows);
            let got = unpack(&out, n);
            assert_eq!(got, cpu::run_batch(&program, &tasks), "round {round}");
            res.commit(&sessions, &got);
            for (s, o) in sessions.iter().zip(&got) {
                states.insert(*s, o.state);
            }
        }
        assert!(res.len() <= pool as usize);
        // Each session is uploaded once, plus the rows changed off the device.
        assert!(uploads < 2 * pool as usize, "{uploads} uploads");
        assert!(uploads >= res.len());
    }

    #[test]
    fn a_full_table_starts_over_and_stays_exact() {
        let mut rng = SplitMix64::new(8);
        let program = random::program(&mut rng, Shape::default());
        let mut res = Residency::new(16);
        let (mut table, mut buf) = (Vec::new(), Vec::new());
        let mut states: HashMap<u64, Regs> = HashMap::new();
        for round in 0..20u64 {
            let sessions: Vec<u64> = (0..10).map(|i| round * 3 + i).collect();
            let mut tasks = random::tasks(&mut rng, &program, 10, None);
            for (t, s) in tasks.iter_mut().zip(&sessions) {
                t.state = *states.entry(*s).or_insert(t.state);
            }
            let packed = res.pack(&sessions, &tasks, &mut buf).unwrap();
            assert!(packed.rows <= 16);
            let out = emulate(&program, &buf, &mut table, packed.rows);
            let got = unpack(&out, 10);
            assert_eq!(got, cpu::run_batch(&program, &tasks), "round {round}");
            res.commit(&sessions, &got);
            for (s, o) in sessions.iter().zip(&got) {
                states.insert(*s, o.state);
            }
        }
        assert!(res.resets() > 0);
        // A batch of clean sessions uploads nothing.
        let sessions: Vec<u64> = (0..10).map(|i| 19 * 3 + i).collect();
        let mut tasks = random::tasks(&mut rng, &program, 10, None);
        for (t, s) in tasks.iter_mut().zip(&sessions) {
            t.state = states[s];
        }
        assert_eq!(res.pack(&sessions, &tasks, &mut buf).unwrap().dirty, 0);
        res.forget();
        assert_eq!(res.pack(&sessions, &tasks, &mut buf).unwrap().dirty, 10);
    }

    #[test]
    fn bad_batches_are_refused() {
        let mut rng = SplitMix64::new(9);
        let program = random::program(&mut rng, Shape::default());
        let tasks = random::tasks(&mut rng, &program, 3, None);
        let mut res = Residency::new(2);
        let mut buf = Vec::new();
        assert!(
            res.pack(&[1, 2, 3], &tasks, &mut buf).is_err(),
            "more than the rows"
        );
        assert!(
            res.pack(&[1, 2], &tasks, &mut buf).is_err(),
            "lengths differ"
        );
        res.pack(&[1, 2], &tasks[..2], &mut buf).unwrap();
        let e = res.pack(&[1, 1], &tasks[..2], &mut buf).unwrap_err();
        assert!(e.contains("twice"), "{e}");
        assert!(res.is_empty(), "a refused batch forgets the table");
    }
}
