//! The CUDA executor (feature `cuda`): `kernels/control.cu`, compiled at run
//! time with NVRTC and loaded with cudarc's dynamic loading (CUDA 12.6 API,
//! feature `cuda-12060`), so the binary builds and starts without a GPU or a
//! toolkit. Session registers of a batch stay in device memory for the whole
//! chain; with [`Mode::DeviceGraph`] the chain is one CUDA graph whose WHILE
//! conditional node re-runs `step → decide` until the device-side decision
//! says stop (CUDA ≥ 12.3 driver), so no decision is copied to the host
//! between steps. [`Mode::HostRoundTrip`] is the comparison: the host copies
//! the decision back after every step and launches the next one itself.
//!
//! The only `unsafe` of the crate lives here (FFI); each block says why it is sound.
#![allow(unsafe_code)]

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg, sys,
};
use cudarc::nvrtc::{CompileOptions, compile_ptx_with_opts};

use crate::cpu::{Effect, Outcome, Task};
use crate::driver::{CpuExecutor, ExecError, Executor, ExecutorKind};
use crate::policy::{MAX_EFFECT_VALUES, MAX_REGISTERS, Program};

/// The kernel source, compiled at run time.
pub const SOURCE: &str = include_str!("../../../kernels/control.cu");

const STEP_THREADS: u32 = 256;
const DECIDE_THREADS: u32 = 1024;
const EFFECT_WORDS: usize = 7;

/// How a chain's steps are sequenced.
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

/// Runs batches on device 0.
#[derive(Debug)]
pub struct GpuExecutor {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    step: CudaFunction,
    decide: CudaFunction,
    decide_host: CudaFunction,
    name: String,
    mode: Mode,
}

/// A batch resident on the device: program words, registers, inputs, routes,
/// flags and results, plus the instantiated chain graph.
#[derive(Debug)]
pub struct Resident {
    n: u32,
    words: CudaSlice<u32>,
    regs: CudaSlice<u32>,
    inputs: CudaSlice<u32>,
    route: CudaSlice<u32>,
    running: CudaSlice<u32>,
    steps: CudaSlice<u32>,
    effect: CudaSlice<u32>,
    ctl: CudaSlice<u32>,
    graph: Option<(sys::CUgraph, sys::CUgraphExec)>,
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
            step: load("control_step")?,
            decide: load("control_decide")?,
            decide_host: load("control_decide_host")?,
            name: ctx.name().unwrap_or_else(|_| "unknown GPU".to_owned()),
            ctx,
            mode: Mode::DeviceGraph,
        })
    }

    /// Chooses how chains are sequenced (default [`Mode::DeviceGraph`]).
    pub fn set_mode(&mut self, mode: Mode) {
        self.mode = mode;
    }

    /// Copies a batch to the device.
    ///
    /// # Errors
    /// [`ExecError::Device`].
    pub fn upload(&self, program: &Program, tasks: &[Task]) -> Result<Resident, ExecError> {
        let s = &self.stream;
        let n = tasks.len();
        let regs: Vec<u32> = tasks.iter().flat_map(|t| t.state).collect();
        let inputs: Vec<u32> = tasks.iter().flat_map(|t| t.input).collect();
        let route: Vec<u32> = tasks.iter().map(|t| u32::from(t.route)).collect();
        Ok(Resident {
            n: u32::try_from(n).map_err(|_| ExecError::Invalid("batch too large".to_owned()))?,
            words: s.clone_htod(program.words()).map_err(dev)?,
            regs: s.clone_htod(&regs).map_err(dev)?,
            inputs: s.clone_htod(&inputs).map_err(dev)?,
            route: s.clone_htod(&route).map_err(dev)?,
            running: s.alloc_zeros::<u32>(n.max(1)).map_err(dev)?,
            steps: s.alloc_zeros::<u32>(n.max(1)).map_err(dev)?,
            effect: s
                .alloc_zeros::<u32>((n * EFFECT_WORDS).max(1))
                .map_err(dev)?,
            ctl: s.alloc_zeros::<u32>(2).map_err(dev)?,
            graph: None,
        })
    }

    /// Runs one chain (up to H steps) for every event of `r`, in `mode`.
    /// Registers and routes stay on the device, so chains can be repeated.
    ///
    /// # Errors
    /// [`ExecError::Device`].
    pub fn chain(&self, r: &mut Resident, mode: Mode) -> Result<(), ExecError> {
        let s = &self.stream;
        let n = r.n as usize;
        s.memcpy_htod(&vec![1u32; n.max(1)], &mut r.running)
            .map_err(dev)?;
        s.memcpy_htod(&[0u32, 1], &mut r.ctl).map_err(dev)?;
        if n == 0 {
            return Ok(());
        }
        match mode {
            Mode::HostRoundTrip => loop {
                self.launch_step(r)?;
                let mut b = s.launch_builder(&self.decide_host);
                b.arg(&r.words)
                    .arg(&r.n)
                    .arg(&r.regs)
                    .arg(&r.running)
                    .arg(&r.ctl);
                // SAFETY: the argument list matches control_decide_host's
                // signature (u32*, u32, u32*, u32*, u32*) and every buffer is
                // sized for r.n events.
                unsafe {
                    b.launch(LaunchConfig {
                        grid_dim: (1, 1, 1),
                        block_dim: (DECIDE_THREADS, 1, 1),
                        shared_mem_bytes: 0,
                    })
                }
                .map_err(dev)?;
                let ctl = s.clone_dtoh(&r.ctl).map_err(dev)?;
                if ctl[1] == 0 {
                    return Ok(());
                }
            },
            Mode::DeviceGraph => {
                if r.graph.is_none() {
                    r.graph = Some(self.build_graph(r)?);
                }
                let (_, exec) = r.graph.expect("built above");
                // SAFETY: exec is a live instantiated graph whose kernel
                // arguments point into r's buffers, which r owns for as long
                // as the graph exists; the stream belongs to the same context.
                unsafe { sys::cuGraphLaunch(exec, s.cu_stream()) }
                    .result()
                    .map_err(dev)?;
                s.synchronize().map_err(dev)
            }
        }
    }

    fn launch_step(&self, r: &Resident) -> Result<(), ExecError> {
        let mut b = self.stream.launch_builder(&self.step);
        b.arg(&r.words)
            .arg(&r.n)
            .arg(&r.regs)
            .arg(&r.inputs)
            .arg(&r.route)
            .arg(&r.running)
            .arg(&r.steps)
            .arg(&r.effect)
            .arg(&r.ctl);
        // SAFETY: the argument list matches control_step's signature and
        // every buffer holds r.n events; threads past r.n return at once.
        unsafe { b.launch(LaunchConfig::for_num_elems(r.n)) }.map_err(dev)?;
        Ok(())
    }

    fn build_graph(&self, r: &Resident) -> Result<(sys::CUgraph, sys::CUgraphExec), ExecError> {
        let s = &self.stream;
        let (words, _a) = r.words.device_ptr(s);
        let (regs, _b) = r.regs.device_ptr(s);
        let (inputs, _c) = r.inputs.device_ptr(s);
        let (route, _d) = r.route.device_ptr(s);
        let (running, _e) = r.running.device_ptr(s);
        let (steps, _f) = r.steps.device_ptr(s);
        let (effect, _g) = r.effect.device_ptr(s);
        let (ctl, _h) = r.ctl.device_ptr(s);
        let mut n = r.n;
        let ctx = self.ctx.cu_ctx();
        // SAFETY: plain driver-API graph construction. Every out-pointer is a
        // valid local; kernel parameter arrays point at locals that outlive
        // the cuGraphAddKernelNode calls (the driver copies the values); the
        // device pointers stay valid while `r` lives, and `r` owns the graph.
        unsafe {
            let mut graph: sys::CUgraph = std::ptr::null_mut();
            sys::cuGraphCreate(&mut graph, 0).result().map_err(dev)?;
            let mut handle: sys::CUgraphConditionalHandle = 0;
            sys::cuGraphConditionalHandleCreate(
                &mut handle,
                graph,
                ctx,
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
                ctx,
            };
            let mut cond: sys::CUgraphNode = std::ptr::null_mut();
            sys::cuGraphAddNode(&mut cond, graph, std::ptr::null(), 0, &mut params)
                .result()
                .map_err(dev)?;
            let body = *params.__bindgen_anon_1.conditional.phGraph_out;
            let p = |x: &mut u64| x as *mut u64 as *mut c_void;
            let (mut w, mut rg, mut ip, mut ro, mut ru, mut st, mut ef, mut ct) =
                (words, regs, inputs, route, running, steps, effect, ctl);
            let mut step_args: [*mut c_void; 9] = [
                p(&mut w),
                &mut n as *mut u32 as *mut c_void,
                p(&mut rg),
                p(&mut ip),
                p(&mut ro),
                p(&mut ru),
                p(&mut st),
                p(&mut ef),
                p(&mut ct),
            ];
            let mut step_params: sys::CUDA_KERNEL_NODE_PARAMS = std::mem::zeroed();
            step_params.func = self.step.cu_function();
            step_params.gridDimX = r.n.div_ceil(STEP_THREADS);
            step_params.gridDimY = 1;
            step_params.gridDimZ = 1;
            step_params.blockDimX = STEP_THREADS;
            step_params.blockDimY = 1;
            step_params.blockDimZ = 1;
            step_params.kernelParams = step_args.as_mut_ptr();
            let mut step_node: sys::CUgraphNode = std::ptr::null_mut();
            sys::cuGraphAddKernelNode_v2(&mut step_node, body, std::ptr::null(), 0, &step_params)
                .result()
                .map_err(dev)?;
            let mut h = handle;
            let mut decide_args: [*mut c_void; 6] = [
                p(&mut w),
                &mut n as *mut u32 as *mut c_void,
                p(&mut rg),
                p(&mut ru),
                p(&mut ct),
                p(&mut h),
            ];
            let mut decide_params = step_params;
            decide_params.func = self.decide.cu_function();
            decide_params.gridDimX = 1;
            decide_params.blockDimX = DECIDE_THREADS;
            decide_params.kernelParams = decide_args.as_mut_ptr();
            let mut decide_node: sys::CUgraphNode = std::ptr::null_mut();
            sys::cuGraphAddKernelNode_v2(&mut decide_node, body, &step_node, 1, &decide_params)
                .result()
                .map_err(dev)?;
            let mut exec: sys::CUgraphExec = std::ptr::null_mut();
            sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0)
                .result()
                .map_err(dev)?;
            Ok((graph, exec))
        }
    }

    /// Copies the outcomes of the last chain back.
    ///
    /// # Errors
    /// [`ExecError::Device`].
    pub fn download(&self, r: &Resident) -> Result<Vec<Outcome>, ExecError> {
        let s = &self.stream;
        let n = r.n as usize;
        let regs = s.clone_dtoh(&r.regs).map_err(dev)?;
        let route = s.clone_dtoh(&r.route).map_err(dev)?;
        let steps = s.clone_dtoh(&r.steps).map_err(dev)?;
        let effect = s.clone_dtoh(&r.effect).map_err(dev)?;
        Ok((0..n)
            .map(|i| {
                let mut state = [0; MAX_REGISTERS];
                state.copy_from_slice(&regs[i * MAX_REGISTERS..][..MAX_REGISTERS]);
                let e = &effect[i * EFFECT_WORDS..][..EFFECT_WORDS];
                let mut values = [0; MAX_EFFECT_VALUES];
                values.copy_from_slice(&e[3..7]);
                Outcome {
                    state,
                    route: route[i] as u16,
                    effect: (e[0] != 0).then_some(Effect {
                        code: e[1],
                        len: e[2] as u8,
                        values,
                    }),
                    steps: steps[i],
                }
            })
            .collect())
    }

    /// Frees a resident batch's graph (its buffers free on drop).
    pub fn release(&self, mut r: Resident) {
        if let Some((graph, exec)) = r.graph.take() {
            // SAFETY: both handles were created by build_graph and are
            // destroyed exactly once, after the stream finished using them.
            unsafe {
                let _ = self.stream.synchronize();
                let _ = sys::cuGraphExecDestroy(exec);
                let _ = sys::cuGraphDestroy(graph);
            }
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

    fn run(&mut self, program: &Program, tasks: &[Task]) -> Result<Vec<Outcome>, ExecError> {
        let mut r = self.upload(program, tasks)?;
        let result = self
            .chain(&mut r, self.mode)
            .and_then(|()| self.download(&r));
        self.release(r);
        result
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
    fn the_kernel_source_matches_the_encoding() {
        // The kernel hard-codes the layout constants of the encoding.
        assert!(SOURCE.contains(&format!("#define HDR {}", crate::policy::HEADER_WORDS)));
        assert!(SOURCE.contains(&format!("#define IW {}", crate::policy::INSTR_WORDS)));
        assert!(SOURCE.contains(&format!("#define NREG {MAX_REGISTERS}")));
        assert!(SOURCE.contains(&format!("#define NIN {}", crate::policy::MAX_INPUTS)));
        assert!(SOURCE.contains(&format!("#define EFFW {EFFECT_WORDS}")));
        assert!(SOURCE.contains(&format!("#define DECIDE_THREADS {DECIDE_THREADS}")));
    }
}
