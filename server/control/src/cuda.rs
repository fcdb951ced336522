//! The CUDA executor (feature `cuda`): `kernels/control.cu`, compiled at run
//! time with NVRTC and loaded with cudarc's dynamic loading (CUDA 12.6 API,
//! feature `cuda-12060`), so the binary builds and starts without a GPU or a
//! toolkit.
//!
//! Session registers are resident on the device between events: one row per
//! session in a device table ([`crate::resident`]); a batch uploads its
//! events' inputs and only the rows the device does not already hold, in one
//! copy, and copies the outcomes back in one copy. With [`Mode::DeviceGraph`]
//! a batch is one launch of a CUDA graph: a kernel that scatters the uploaded
//! rows, then a WHILE conditional node that re-runs `step → decide` until the
//! device-side decision says stop (CUDA ≥ 12.3 driver), so no decision is
//! copied to the host between steps. The graph is built once and rebuilt only
//! when its buffers grow. [`Mode::HostRoundTrip`] is the comparison: the host
//! copies the decision back after every step and launches the next one itself.
//!
//! The only `unsafe` of the crate lives here (FFI); each block says why it is sound.
#![allow(unsafe_code)]

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg, sys,
};
use cudarc::nvrtc::{CompileOptions, compile_ptx_with_opts};

use crate::cpu::{Outcome, Task};
use crate::driver::{CpuExecutor, ExecError, Executor, ExecutorKind};
use crate::policy::{HEADER_WORDS, INSTR_WORDS, MAX_BODY, MAX_REGISTERS, MAX_ROUTES, Program};
use crate::resident::{self, DEFAULT_MAX_ROWS, OUT_WORDS, Residency};

/// The kernel source, compiled at run time.
pub const SOURCE: &str = include_str!("../../../kernels/control.cu");

const STEP_THREADS: u32 = 256;
const DECIDE_THREADS: u32 = 1024;
/// Most words of an encoded program.
const MAX_WORDS: usize = HEADER_WORDS + 2 * MAX_ROUTES + MAX_ROUTES * MAX_BODY * INSTR_WORDS;
/// Smallest batch capacity and session table allocated.
const MIN_EVENTS: usize = 256;
const MIN_ROWS: usize = 4096;

/// How a batch's chain of steps is sequenced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// One graph launch; the device decides and launches each next step.
    DeviceGraph,
    /// The host copies the decision back after each step and relaunches.
    HostRoundTrip,
}

fn dev(e: impl std::fmt::Display) -> ExecError {
    ExecError::Device(e.to_string())
}

/// Whether the CUDA driver and NVRTC libraries can be loaded (no device needed).
pub fn libraries_present() -> bool {
    // SAFETY: both functions only try to dlopen the libraries by name and
    // close them again; they touch no CUDA state.
    unsafe { sys::is_culib_present() && cudarc::nvrtc::sys::is_culib_present() }
}

/// The GPU executor when a driver, NVRTC and a device are usable, else the
/// CPU executor with the reason in its status (`cpu (no CUDA driver)`).
pub fn best_executor() -> Box<dyn Executor + Send> {
    match GpuExecutor::new() {
        Ok(gpu) => Box::new(gpu),
        Err(why) => Box::new(CpuExecutor::with_note(why)),
    }
}

#[derive(Debug)]
struct Kernels {
    begin: CudaFunction,
    step: CudaFunction,
    decide: CudaFunction,
    decide_host: CudaFunction,
}

/// An instantiated batch graph; its kernel arguments point into a [`Buffers`].
#[derive(Debug)]
struct Graph {
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
}

// SAFETY: driver-API graph handles are not tied to the thread that created
// them; the executor owns its graph and only uses it through `&mut self`
// (never from two threads at once), binding its context to the calling
// thread first.
unsafe impl Send for Graph {}

/// Device memory: the program, the session table and one batch's buffers
/// for up to `events` events.
#[derive(Debug)]
struct Buffers {
    events: usize,
    rows: usize,
    words: CudaSlice<u32>,
    /// The program `words` holds.
    loaded: Vec<u32>,
    table: CudaSlice<u32>,
    input: CudaSlice<u32>,
    route: CudaSlice<u32>,
    running: CudaSlice<u32>,
    out: CudaSlice<u32>,
    ctl: CudaSlice<u32>,
    graph: Option<Graph>,
}

/// Counters of the executor's work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Batches run.
    pub batches: u64,
    /// Events run.
    pub events: u64,
    /// Session rows uploaded (new sessions and states changed off the device).
    pub rows_uploaded: u64,
    /// Times the program words were uploaded.
    pub programs_uploaded: u64,
    /// Times the batch graph was built.
    pub graphs_built: u64,
}

/// Runs batches on device 0 with session state resident between batches.
#[derive(Debug)]
pub struct GpuExecutor {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    kernels: Kernels,
    name: String,
    mode: Mode,
    residency: Residency,
    buffers: Option<Buffers>,
    staging: Vec<u32>,
    output: Vec<u32>,
    counters: Counters,
}

impl GpuExecutor {
    /// Loads the driver, opens device 0 and compiles the kernels.
    ///
    /// # Errors
    /// A short reason (`no CUDA driver`, `no CUDA device`, the NVRTC log).
    pub fn new() -> Result<Self, String> {
        if !libraries_present() {
            return Err("no CUDA driver".to_owned());
        }
        let ctx = CudaContext::new(0).map_err(|e| format!("no CUDA device: {e}"))?;
        let (major, _minor) = ctx.compute_capability().map_err(|e| e.to_string())?;
        let arch: &'static str = if major >= 9 {
            "compute_90"
        } else if major >= 8 {
            "compute_80"
        } else {
            "compute_70"
        };
        let ptx = compile_ptx_with_opts(
            SOURCE,
            CompileOptions {
                arch: Some(arch),
                name: Some("control.cu".to_owned()),
                ..Default::default()
            },
        )
        .map_err(|e| format!("NVRTC failed: {e}"))?;
        let module = ctx.load_module(ptx).map_err(|e| e.to_string())?;
        let load = |name: &str| module.load_function(name).map_err(|e| e.to_string());
        Ok(Self {
            stream: ctx.default_stream(),
            kernels: Kernels {
                begin: load("control_begin")?,
                step: load("control_step")?,
                decide: load("control_decide")?,
                decide_host: load("control_decide_host")?,
            },
            name: ctx.name().unwrap_or_else(|_| "unknown GPU".to_owned()),
            ctx,
            mode: Mode::DeviceGraph,
            residency: Residency::new(DEFAULT_MAX_ROWS),
            buffers: None,
            staging: Vec::new(),
            output: Vec::new(),
            counters: Counters::default(),
        })
    }

    /// Chooses how chains are sequenced (default [`Mode::DeviceGraph`]).
    pub fn set_mode(&mut self, mode: Mode) {
        self.mode = mode;
    }

    /// Forgets every resident session: each is uploaded again on its next
    /// batch (to measure cold batches).
    pub fn forget(&mut self) {
        self.residency.forget();
    }

    /// What the executor has done so far.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Grows the device buffers to hold `events` events and `rows` session
    /// rows (keeping the table's contents); a growth drops the graph.
    fn reserve(&mut self, events: usize, rows: usize) -> Result<(), ExecError> {
        let s = &self.stream;
        let events = events.next_power_of_two().max(MIN_EVENTS);
        let rows = rows.next_power_of_two().max(MIN_ROWS);
        let batch = |events: usize| -> Result<_, ExecError> {
            Ok((
                s.alloc_zeros::<u32>(resident::input_words(events, events))
                    .map_err(dev)?,
                s.alloc_zeros::<u32>(events).map_err(dev)?,
                s.alloc_zeros::<u32>(events).map_err(dev)?,
                s.alloc_zeros::<u32>(events * OUT_WORDS).map_err(dev)?,
            ))
        };
        let Some(b) = &mut self.buffers else {
            let (input, route, running, out) = batch(events)?;
            self.buffers = Some(Buffers {
                events,
                rows,
                words: s.alloc_zeros::<u32>(MAX_WORDS).map_err(dev)?,
                loaded: Vec::new(),
                table: s.alloc_zeros::<u32>(rows * MAX_REGISTERS).map_err(dev)?,
                input,
                route,
                running,
                out,
                ctl: s.alloc_zeros::<u32>(2).map_err(dev)?,
                graph: None,
            });
            return Ok(());
        };
        if b.events < events {
            destroy(s, b.graph.take());
            (b.input, b.route, b.running, b.out) = batch(events)?;
            b.events = events;
        }
        if b.rows < rows {
            destroy(s, b.graph.take());
            let mut table = s.alloc_zeros::<u32>(rows * MAX_REGISTERS).map_err(dev)?;
            let old = b.rows * MAX_REGISTERS;
            s.memcpy_dtod(&b.table, &mut table.slice_mut(..old))
                .map_err(dev)?;
            b.table = table;
            b.rows = rows;
        }
        Ok(())
    }

    /// Runs one packed batch (in `self.staging`) of `n` events needing
    /// `rows` table rows; the outcomes land in `self.output`.
    fn execute(&mut self, program: &Program, n: usize, rows: usize) -> Result<(), ExecError> {
        let words = program.words();
        if words.len() > MAX_WORDS {
            return Err(ExecError::Invalid(format!(
                "program of {} words exceeds {MAX_WORDS}",
                words.len()
            )));
        }
        self.ctx.bind_to_thread().map_err(dev)?;
        self.reserve(n, rows)?;
        let s = &self.stream;
        let b = self.buffers.as_mut().expect("reserved above");
        if b.loaded != words {
            s.memcpy_htod(words, &mut b.words.slice_mut(..words.len()))
                .map_err(dev)?;
            b.loaded = words.to_vec();
            self.counters.programs_uploaded += 1;
        }
        s.memcpy_htod(&self.staging, &mut b.input.slice_mut(..self.staging.len()))
            .map_err(dev)?;
        match self.mode {
            Mode::DeviceGraph => {
                if b.graph.is_none() {
                    b.graph = Some(build_graph(&self.ctx, s, &self.kernels, b)?);
                    self.counters.graphs_built += 1;
                }
                let exec = b.graph.as_ref().expect("built above").exec;
                // SAFETY: exec is a live instantiated graph whose kernel
                // arguments point into b's buffers; any reallocation of them
                // destroys the graph first (reserve), and the stream belongs
                // to the graph's context.
                unsafe { sys::cuGraphLaunch(exec, s.cu_stream()) }
                    .result()
                    .map_err(dev)?;
            }
            Mode::HostRoundTrip => host_round_trip(s, &self.kernels, b, n as u32)?,
        }
        self.output.resize(n * OUT_WORDS, 0);
        s.memcpy_dtoh(&b.out.slice(..n * OUT_WORDS), &mut self.output[..])
            .map_err(dev)?;
        s.synchronize().map_err(dev)
    }
}

/// Sequences a chain from the host: begin, then step and decide with the
/// decision copied back after every step.
fn host_round_trip(
    s: &Arc<CudaStream>,
    k: &Kernels,
    b: &mut Buffers,
    n: u32,
) -> Result<(), ExecError> {
    let mut begin = s.launch_builder(&k.begin);
    begin
        .arg(&b.input)
        .arg(&mut b.table)
        .arg(&mut b.route)
        .arg(&mut b.running)
        .arg(&mut b.ctl);
    // SAFETY: the arguments match control_begin(const u32*, u32*, u32*, u32*,
    // u32*); the buffers hold `b.events >= n` events and the table every
    // row the packed input names (reserve); the kernel loops over the grid.
    unsafe { begin.launch(LaunchConfig::for_num_elems(n)) }.map_err(dev)?;
    let mut ctl = [0u32; 2];
    loop {
        let mut step = s.launch_builder(&k.step);
        step.arg(&b.words)
            .arg(&b.input)
            .arg(&mut b.table)
            .arg(&mut b.route)
            .arg(&mut b.running)
            .arg(&mut b.out)
            .arg(&b.ctl);
        // SAFETY: the arguments match control_step's signature; threads past
        // the batch's n return at once.
        unsafe { step.launch(LaunchConfig::for_num_elems(n)) }.map_err(dev)?;
        let mut decide = s.launch_builder(&k.decide_host);
        decide
            .arg(&b.words)
            .arg(&b.input)
            .arg(&b.out)
            .arg(&mut b.running)
            .arg(&mut b.ctl);
        // SAFETY: the arguments match control_decide_host's signature; it
        // runs as one block of DECIDE_THREADS, the size its shared arrays have.
        unsafe {
            decide.launch(LaunchConfig {
                grid_dim: (1, 1, 1),
                block_dim: (DECIDE_THREADS, 1, 1),
                shared_mem_bytes: 0,
            })
        }
        .map_err(dev)?;
        s.memcpy_dtoh(&b.ctl, &mut ctl).map_err(dev)?;
        s.synchronize().map_err(dev)?;
        if ctl[1] == 0 {
            return Ok(());
        }
    }
}

/// Builds the batch graph over `b`'s buffers: begin, then a WHILE node
/// around step → decide.
fn build_graph(
    ctx: &Arc<CudaContext>,
    s: &Arc<CudaStream>,
    k: &Kernels,
    b: &Buffers,
) -> Result<Graph, ExecError> {
    let (mut words, _a) = b.words.device_ptr(s);
    let (mut input, _b) = b.input.device_ptr(s);
    let (mut table, _c) = b.table.device_ptr(s);
    let (mut route, _d) = b.route.device_ptr(s);
    let (mut running, _e) = b.running.device_ptr(s);
    let (mut out, _f) = b.out.device_ptr(s);
    let (mut ctl, _g) = b.ctl.device_ptr(s);
    let blocks = (b.events as u32).div_ceil(STEP_THREADS);
    let cu_ctx = ctx.cu_ctx();
    let p = |x: &mut u64| x as *mut u64 as *mut c_void;
    // SAFETY: plain driver-API graph construction. Every out-pointer is a
    // valid local; kernel parameter arrays point at locals that outlive the
    // cuGraphAddKernelNode calls (the driver copies the values); the device
    // pointers stay valid until the buffers are reallocated, which destroys
    // the graph first. On an error the partly built graph is destroyed.
    unsafe {
        let mut graph: sys::CUgraph = std::ptr::null_mut();
        sys::cuGraphCreate(&mut graph, 0).result().map_err(dev)?;
        let built = (|| -> Result<sys::CUgraphExec, ExecError> {
            let kernel = |f: &CudaFunction, grid: u32, block: u32, args: *mut *mut c_void| {
                let mut params: sys::CUDA_KERNEL_NODE_PARAMS = std::mem::zeroed();
                params.func = f.cu_function();
                params.gridDimX = grid;
                params.gridDimY = 1;
                params.gridDimZ = 1;
                params.blockDimX = block;
                params.blockDimY = 1;
                params.blockDimZ = 1;
                params.kernelParams = args;
                params
            };
            let mut begin_args = [
                p(&mut input),
                p(&mut table),
                p(&mut route),
                p(&mut running),
                p(&mut ctl),
            ];
            let begin_params = kernel(&k.begin, blocks, STEP_THREADS, begin_args.as_mut_ptr());
            let mut begin: sys::CUgraphNode = std::ptr::null_mut();
            sys::cuGraphAddKernelNode_v2(&mut begin, graph, std::ptr::null(), 0, &begin_params)
                .result()
                .map_err(dev)?;

            let mut handle: sys::CUgraphConditionalHandle = 0;
            sys::cuGraphConditionalHandleCreate(
                &mut handle,
                graph,
                cu_ctx,
                1,
                sys::CU_GRAPH_COND_ASSIGN_DEFAULT,
            )
            .result()
            .map_err(dev)?;
            let mut params: sys::CUgraphNodeParams = std::mem::zeroed();
            params.type_ = sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_CONDITIONAL;
            params.__bindgen_anon_1.conditional = sys::CUDA_CONDITIONAL_NODE_PARAMS {
                handle,
                type_: sys::CUgraphConditionalNodeType::CU_GRAPH_COND_TYPE_WHILE,
                size: 1,
                phGraph_out: std::ptr::null_mut(),
                ctx: cu_ctx,
            };
            let mut cond: sys::CUgraphNode = std::ptr::null_mut();
            sys::cuGraphAddNode(&mut cond, graph, &begin, 1, &mut params)
                .result()
                .map_err(dev)?;
            let body = *params.__bindgen_anon_1.conditional.phGraph_out;

            let mut step_args = [
                p(&mut words),
                p(&mut input),
                p(&mut table),
                p(&mut route),
                p(&mut running),
                p(&mut out),
                p(&mut ctl),
            ];
            let step_params = kernel(&k.step, blocks, STEP_THREADS, step_args.as_mut_ptr());
            let mut step: sys::CUgraphNode = std::ptr::null_mut();
            sys::cuGraphAddKernelNode_v2(&mut step, body, std::ptr::null(), 0, &step_params)
                .result()
                .map_err(dev)?;
            let mut h = handle;
            let mut decide_args = [
                p(&mut words),
                p(&mut input),
                p(&mut out),
                p(&mut running),
                p(&mut ctl),
                p(&mut h),
            ];
            let decide_params = kernel(&k.decide, 1, DECIDE_THREADS, decide_args.as_mut_ptr());
            let mut decide: sys::CUgraphNode = std::ptr::null_mut();
            sys::cuGraphAddKernelNode_v2(&mut decide, body, &step, 1, &decide_params)
                .result()
                .map_err(dev)?;
            let mut exec: sys::CUgraphExec = std::ptr::null_mut();
            sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0)
                .result()
                .map_err(dev)?;
            Ok(exec)
        })();
        match built {
            Ok(exec) => Ok(Graph { graph, exec }),
            Err(e) => {
                let _ = sys::cuGraphDestroy(graph);
                Err(e)
            }
        }
    }
}

/// Destroys a graph after the stream has finished with it.
fn destroy(s: &CudaStream, graph: Option<Graph>) {
    if let Some(g) = graph {
        // SAFETY: both handles were created by build_graph and are destroyed
        // exactly once (the Option was taken), after the stream finished
        // every launch of them.
        unsafe {
            let _ = s.synchronize();
            let _ = sys::cuGraphExecDestroy(g.exec);
            let _ = sys::cuGraphDestroy(g.graph);
        }
    }
}

impl Drop for GpuExecutor {
    fn drop(&mut self) {
        if let Some(b) = &mut self.buffers {
            destroy(&self.stream, b.graph.take());
        }
    }
}

impl Executor for GpuExecutor {
    fn kind(&self) -> ExecutorKind {
        ExecutorKind::Gpu
    }

    fn status(&self) -> String {
        format!("gpu ({})", self.name)
    }

    /// Runs tasks that belong to no session: nothing stays resident (the
    /// session table is forgotten before and after).
    fn run(&mut self, program: &Program, tasks: &[Task]) -> Result<Vec<Outcome>, ExecError> {
        self.residency.forget();
        let ids: Vec<u64> = (0..tasks.len() as u64).collect();
        let out = self.run_sessions(program, &ids, tasks);
        self.residency.forget();
        out
    }

    fn run_sessions(
        &mut self,
        program: &Program,
        sessions: &[u64],
        tasks: &[Task],
    ) -> Result<Vec<Outcome>, ExecError> {
        if tasks.is_empty() {
            return Ok(Vec::new());
        }
        let mut staging = std::mem::take(&mut self.staging);
        let packed = self
            .residency
            .pack(sessions, tasks, &mut staging)
            .map_err(ExecError::Invalid);
        self.staging = staging;
        let packed = packed?;
        match self.execute(program, packed.n, packed.rows) {
            Ok(()) => {
                let outcomes = resident::unpack(&self.output, packed.n);
                self.residency.commit(sessions, &outcomes);
                self.counters.batches += 1;
                self.counters.events += packed.n as u64;
                self.counters.rows_uploaded += packed.dirty as u64;
                Ok(outcomes)
            }
            Err(e) => {
                // The device rows may be half written: upload everything again.
                self.residency.forget();
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_driver_the_cpu_executor_says_why() {
        let exec = best_executor();
        if libraries_present() {
            // A machine with CUDA: either a usable GPU or a stated reason.
            assert!(exec.status().starts_with("gpu (") || exec.status().starts_with("cpu ("));
        } else {
            assert_eq!(exec.status(), "cpu (no CUDA driver)");
            assert_eq!(exec.kind(), ExecutorKind::Cpu);
        }
    }

    #[test]
    fn the_kernel_source_matches_the_encoding_and_the_layouts() {
        // The kernel hard-codes the layout constants of the encoding and of
        // the packed buffers of `resident`.
        assert!(SOURCE.contains(&format!("#define HDR {HEADER_WORDS}")));
        assert!(SOURCE.contains(&format!("#define IW {INSTR_WORDS}")));
        assert!(SOURCE.contains(&format!("#define NREG {MAX_REGISTERS}")));
        assert!(SOURCE.contains(&format!("#define NIN {}", crate::policy::MAX_INPUTS)));
        assert!(SOURCE.contains(&format!("#define EFFW {}", resident::EFFECT_WORDS)));
        assert!(SOURCE.contains(&format!("#define INHDR {}", resident::IN_HEADER)));
        assert!(SOURCE.contains(&format!("#define OUTW {OUT_WORDS}")));
        assert!(SOURCE.contains(&format!("#define DECIDE_THREADS {DECIDE_THREADS}")));
    }
}
