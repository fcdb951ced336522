// Hearth control executor: one thread per event interprets its route's body
// (the canonical encoding of hearth_control::policy::Program::words). Session
// registers are resident in a device table (one row of NREG words per
// session, hearth_control::resident); a batch names each event's row and
// carries only the rows the device does not already hold. Compiled at run
// time with NVRTC; no headers needed.
//
// A batch runs as
//   control_begin  -- scatters the uploaded rows into the table, marks every
//                     event running, resets the step counter
//   then a chain of up to H observation-free steps:
//   control_step   -- every running event runs one step on its table row,
//                     then its per-event decision
//   control_decide -- one block: batch-wide reduction, "any event still running",
//                     step counter; sets the WHILE conditional of the graph, so
//                     the next step is launched by the device and the decision is
//                     never copied to the host
// inside one CUDA graph (begin, then a WHILE conditional node around step and
// decide; CUDA >= 12.3). The host round-trip variant used for comparison
// replaces control_decide with control_decide_host, which leaves the decision
// in ctl[1] for the host to copy back before it launches the next step itself.
//
// Buffers: w (program words), table[rows*NREG], in (packed input, below),
// route[cap], running[cap] (1/0), out[cap*OUTW] (packed output, below),
// ctl[2] = {steps done k, any running}.
//   in  = {n, d, 0, 0}, slot[n], route[n], input[n*NIN], dslot[d], drow[d*NREG]
//   out = per event: regs[NREG], route, steps, emitted, code, len, value[NEFF]

typedef __device_builtin__ unsigned long long cudaGraphConditionalHandle;
extern "C" __device__ __cudart_builtin__ void cudaGraphSetConditional(cudaGraphConditionalHandle handle,
                                                                      unsigned int value);

#define NREG 16
#define NIN 8
#define NEFF 4
#define EFFW 7
#define HDR 12
#define IW 12
#define DECIDE_THREADS 1024
#define INHDR 4
#define OUTW 25

__device__ __forceinline__ unsigned mix32(unsigned a, unsigned b) {
    unsigned h = a ^ (b * 0x9E3779B9u);
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    return h ^ (h >> 16);
}

__device__ __forceinline__ bool compare(unsigned cmp, unsigned a, unsigned b) {
    switch (cmp) {
        case 0: return true;
        case 1: return a == b;
        case 2: return a != b;
        case 3: return a < b;
        case 4: return a <= b;
        case 5: return a > b;
        default: return a >= b;
    }
}

__device__ __forceinline__ unsigned binop(unsigned op, unsigned a, unsigned b) {
    switch (op) {
        case 1: return a + b;
        case 2: return a - b;
        case 3: return a * b;
        case 4: { unsigned s = a + b; return s < a ? 0xFFFFFFFFu : s; }
        case 5: return a > b ? a - b : 0u;
        case 6: { unsigned long long p = (unsigned long long)a * b; return p > 0xFFFFFFFFull ? 0xFFFFFFFFu : (unsigned)p; }
        case 7: return a ^ b;
        case 8: return a & b;
        case 9: return a | b;
        case 10: return __funnelshift_l(a, a, b & 31u);
        case 11: return __funnelshift_r(a, a, b & 31u);
        default: return mix32(a, b);
    }
}

#define ARG(kind, val) ((kind) == 0u ? r[(val) & 15u] : (kind) == 1u ? inp[(val) & 7u] : (val))

extern "C" __global__ void control_begin(const unsigned* __restrict__ in, unsigned* __restrict__ table,
                                         unsigned* __restrict__ route, unsigned* __restrict__ running,
                                         unsigned* __restrict__ ctl) {
    const unsigned n = in[0], d = in[1];
    const unsigned* first = in + INHDR + n;
    const unsigned* dslot = in + INHDR + (size_t)n * (2u + NIN);
    const unsigned* drow = dslot + d;
    const unsigned m = n > d ? n : d;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < m; i += gridDim.x * blockDim.x) {
        if (i < d) {
            unsigned* row = table + (size_t)dslot[i] * NREG;
#pragma unroll
            for (int q = 0; q < NREG; ++q) row[q] = drow[(size_t)i * NREG + q];
        }
        if (i < n) {
            route[i] = first[i];
            running[i] = 1u;
        }
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        ctl[0] = 0u;
        ctl[1] = n > 0u ? 1u : 0u;
    }
}

extern "C" __global__ void control_step(const unsigned* __restrict__ w, const unsigned* __restrict__ in,
                                        unsigned* __restrict__ table, unsigned* __restrict__ route,
                                        unsigned* __restrict__ running, unsigned* __restrict__ out,
                                        const unsigned* __restrict__ ctl) {
    const unsigned n = in[0];
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || running[i] == 0u) return;
    const unsigned k = ctl[0] + 1u;
    const unsigned max_steps = w[5];
    const unsigned nroutes = w[4];
    unsigned* row = table + (size_t)in[INHDR + i] * NREG;
    const unsigned* inputs = in + INHDR + 2u * (size_t)n + (size_t)i * NIN;
    unsigned r[NREG];
    unsigned inp[NIN];
#pragma unroll
    for (int q = 0; q < NREG; ++q) r[q] = row[q];
#pragma unroll
    for (int q = 0; q < NIN; ++q) inp[q] = inputs[q];
    const unsigned cur = route[i];
    unsigned next = cur;
    unsigned emitted = 0u, code = 0u, len = 0u, ev[NEFF] = {0u, 0u, 0u, 0u};
    const unsigned first = w[HDR + 2u * cur], count = w[HDR + 2u * cur + 1u];
    const unsigned* ins = w + HDR + 2u * nroutes + (size_t)first * IW;
    for (unsigned j = 0; j < count; ++j, ins += IW) {
        const unsigned op = ins[0];
        if (op >= 1u && op <= 12u) {
            unsigned a = ARG(ins[3], ins[4]);
            unsigned b = ARG(ins[5], ins[6]);
            r[ins[1] & 15u] = binop(op, a, b);
        } else if (op == 20u) {
            bool t = compare(ins[2], ARG(ins[3], ins[4]), ARG(ins[5], ins[6]));
            unsigned v = t ? ARG(ins[7], ins[8]) : ARG(ins[9], ins[10]);
            r[ins[1] & 15u] = v;
        } else if (op == 21u) {
            if (compare(ins[2], ARG(ins[3], ins[4]), ARG(ins[5], ins[6]))) next = ins[1];
        } else if (op == 22u) {
            if (compare(ins[2], ARG(ins[3], ins[4]), ARG(ins[5], ins[6]))) {
                emitted = 1u;
                code = ins[1];
                len = ins[7];
#pragma unroll
                for (unsigned q = 0; q < NEFF; ++q) ev[q] = q < len ? r[(ins[8] >> (8u * q)) & 15u] : 0u;
            }
        }
    }
    unsigned* o = out + (size_t)i * OUTW;
#pragma unroll
    for (int q = 0; q < NREG; ++q) {
        row[q] = r[q];
        o[q] = r[q];
    }
    route[i] = next;
    o[NREG] = next;
    o[NREG + 1] = k;
    o[NREG + 2] = emitted;
    o[NREG + 3] = code;
    o[NREG + 4] = len;
#pragma unroll
    for (int q = 0; q < NEFF; ++q) o[NREG + 5 + q] = ev[q];
    bool alive = emitted == 0u && k < max_steps;
    if (alive && w[6] == 1u) alive = compare(w[7], ARG(w[8], w[9]), ARG(w[10], w[11]));
    running[i] = alive ? 1u : 0u;
}

// One block of DECIDE_THREADS threads: the batch-wide decision and "any running".
__device__ void decide(const unsigned* __restrict__ w, const unsigned* __restrict__ in,
                       const unsigned* __restrict__ out, unsigned* __restrict__ running,
                       unsigned* __restrict__ ctl) {
    const unsigned n = in[0];
    __shared__ unsigned s_min[DECIDE_THREADS], s_max[DECIDE_THREADS], s_sum[DECIDE_THREADS];
    __shared__ unsigned s_nz[DECIDE_THREADS], s_all[DECIDE_THREADS], s_run[DECIDE_THREADS];
    __shared__ unsigned s_pass;
    const unsigned t = threadIdx.x;
    const unsigned reg = w[8] & 15u;
    unsigned mn = 0xFFFFFFFFu, mx = 0u, sum = 0u, nz = 0u, all = 1u, run = 0u;
    for (unsigned i = t; i < n; i += blockDim.x) {
        if (running[i]) {
            unsigned v = out[(size_t)i * OUTW + reg];
            mn = min(mn, v);
            mx = max(mx, v);
            sum += v;
            nz |= v != 0u;
            all &= v != 0u;
            run = 1u;
        }
    }
    s_min[t] = mn; s_max[t] = mx; s_sum[t] = sum; s_nz[t] = nz; s_all[t] = all; s_run[t] = run;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) {
            s_min[t] = min(s_min[t], s_min[t + s]);
            s_max[t] = max(s_max[t], s_max[t + s]);
            s_sum[t] += s_sum[t + s];
            s_nz[t] |= s_nz[t + s];
            s_all[t] &= s_all[t + s];
            s_run[t] |= s_run[t + s];
        }
        __syncthreads();
    }
    if (t == 0) {
        unsigned pass = 1u;
        if (w[6] == 2u && s_run[0]) {
            unsigned v;
            switch (w[7]) {
                case 1: v = s_min[0]; break;
                case 2: v = s_max[0]; break;
                case 3: v = s_sum[0]; break;
                case 4: v = s_nz[0]; break;
                default: v = s_all[0]; break;
            }
            pass = compare(w[9], v, w[10]) ? 1u : 0u;
        }
        s_pass = pass;
        ctl[0] += 1u;
        ctl[1] = (pass && s_run[0]) ? 1u : 0u;
    }
    __syncthreads();
    if (!s_pass)
        for (unsigned i = t; i < n; i += blockDim.x) running[i] = 0u;
}

extern "C" __global__ void control_decide(const unsigned* __restrict__ w, const unsigned* __restrict__ in,
                                          const unsigned* __restrict__ out, unsigned* __restrict__ running,
                                          unsigned* __restrict__ ctl, cudaGraphConditionalHandle handle) {
    decide(w, in, out, running, ctl);
    if (threadIdx.x == 0) cudaGraphSetConditional(handle, ctl[1]);
}

extern "C" __global__ void control_decide_host(const unsigned* __restrict__ w, const unsigned* __restrict__ in,
                                               const unsigned* __restrict__ out, unsigned* __restrict__ running,
                                               unsigned* __restrict__ ctl) {
    decide(w, in, out, running, ctl);
}
