/* Kernels written for simcuda's PTX interpreter test (tests/unit/test_ptx.c):
 * each exercises what the standard kernels do not (shared memory, warp
 * shuffles and votes, atomics, divergence, conversions), and each result is
 * exact, so a host reference computes the same bytes. */

/* Sum of in[0..n) per block: grid-stride, a warp-shuffle reduction, shared
 * memory across warps, one double atomic per block. Values are small
 * integers: every partial sum is exact in any order. */
extern "C" __global__ void pt_reduce(double *out, const double *in, unsigned n)
{
    __shared__ double warp_sums[32];
    double s = 0.0;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        s += in[i];
    for (int off = 16; off > 0; off >>= 1)
        s += __shfl_down_sync(0xffffffffu, s, off);
    unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0)
        warp_sums[warp] = s;
    __syncthreads();
    if (warp == 0) {
        unsigned nw = (blockDim.x + 31) / 32;
        s = lane < nw ? warp_sums[lane] : 0.0;
        for (int off = 16; off > 0; off >>= 1)
            s += __shfl_xor_sync(0xffffffffu, s, off);
        if (lane == 0)
            atomicAdd(out, s);
    }
}

/* Divergent control flow: a data-dependent loop and nested branches. */
extern "C" __global__ void pt_diverge(int *out, const int *in, unsigned n)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    int v = in[i], r = 0;
    if (v % 3 == 0) {
        for (int k = 0; k < (v & 15); k++)
            r += k * v;
    } else if (v % 3 == 1) {
        r = v * 7 - 3;
        if (v & 4)
            r ^= 0x5a5a;
        else
            r = -r;
    } else {
        unsigned x = (unsigned)v;
        while (x > 1)
            x = (x & 1) ? 3 * x + 1 : x / 2, r++;
    }
    out[i] = r;
}

/* Integer atomics on global and shared memory. res: [0] add, [1] min,
 * [2] max, [3] and, [4] or, [5] xor, [6] cas count, [7] exch. */
extern "C" __global__ void pt_atomics(int *res, unsigned *ures, float *fres, const int *in, unsigned n)
{
    __shared__ int sh_add;
    if (threadIdx.x == 0)
        sh_add = 0;
    __syncthreads();
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int v = in[i];
        atomicAdd(&res[0], v);
        atomicMin(&res[1], v);
        atomicMax(&res[2], v);
        atomicAnd(&ures[0], (unsigned)v | 0xffff0000u);
        atomicOr(&ures[1], (unsigned)v);
        atomicXor(&ures[2], (unsigned)v);
        atomicMax(&ures[3], (unsigned)v * 2654435761u);
        atomicAdd(&sh_add, v);
        atomicAdd(&fres[0], (float)(v & 255));
        int old;
        do
            old = res[6];
        while (atomicCAS(&res[6], old, old + 1) != old);
        atomicExch(&res[7], 12345);
    }
    __syncthreads();
    if (threadIdx.x == 0)
        atomicAdd(&res[8], sh_add);
}

/* Dynamic shared memory: each block reverses its slice. */
extern "C" __global__ void pt_reverse(float *out, const float *in, unsigned n)
{
    extern __shared__ float buf[];
    unsigned base = blockIdx.x * blockDim.x, t = threadIdx.x;
    if (base + t < n)
        buf[t] = in[base + t];
    __syncthreads();
    unsigned m = n - base < blockDim.x ? n - base : blockDim.x;
    if (t < m)
        out[base + t] = buf[m - 1 - t];
}

/* Votes and ballots: per warp, the ballot of odd inputs, any, all. */
extern "C" __global__ void pt_vote(unsigned *out, const int *in)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = in[i];
    unsigned b = __ballot_sync(0xffffffffu, v & 1);
    int any = __any_sync(0xffffffffu, v > 1000);
    int all = __all_sync(0xffffffffu, v >= 0);
    unsigned up = __shfl_up_sync(0xffffffffu, (unsigned)v, 3);
    unsigned idx = __shfl_sync(0xffffffffu, (unsigned)v, (threadIdx.x * 7) & 31);
    out[i * 4 + 0] = b;
    out[i * 4 + 1] = (unsigned)any | (unsigned)all << 1 | __popc(b) << 2;
    out[i * 4 + 2] = up;
    out[i * 4 + 3] = idx;
}

/* Conversions and arithmetic with exact results on any IEEE machine. */
extern "C" __global__ void pt_convert(long long *out, const double *in, unsigned n)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    double d = in[i];
    float f = (float)d;
    long long a = (long long)d;                 /* truncation */
    int b = __float2int_rn(f);                  /* nearest even */
    int c = __float2int_rd(f), e = __float2int_ru(f);
    unsigned u = __double2uint_rz(d < 0 ? -d : d);
    long long q = (long long)(i + 1) * -123456789LL;
    out[i * 8 + 0] = a;
    out[i * 8 + 1] = b;
    out[i * 8 + 2] = c;
    out[i * 8 + 3] = e;
    out[i * 8 + 4] = u;
    out[i * 8 + 5] = q / 7 + q % 7;
    out[i * 8 + 6] = (long long)(__fdiv_rn(f, 4.0f) * 8.0f);
    out[i * 8 + 7] = (long long)__dsqrt_rn(d * d);
}

/* Module-scope variables, local arrays and barrier reductions:
 * out[blockIdx.x*4 + 0..3] = count of odd tids, or(tid == 5), and(tid < 1000),
 * a local-array lookup; pt_counter counts every thread. */
__device__ unsigned pt_counter;
__constant__ int pt_table[8] = {3, 1, 4, 1, 5, 9, 2, 6};

extern "C" __global__ void pt_misc(int *out, int k)
{
    int a[40];
    for (int j = 0; j < 40; j++)
        a[j] = j * (int)threadIdx.x + pt_table[j & 7];
    atomicAdd(&pt_counter, 1u);
    int c = __syncthreads_count(threadIdx.x & 1);
    int o = __syncthreads_or(threadIdx.x == 5);
    int n = __syncthreads_and(threadIdx.x < 1000);
    if (threadIdx.x == 0) {
        out[blockIdx.x * 5 + 0] = c;
        out[blockIdx.x * 5 + 1] = o;
        out[blockIdx.x * 5 + 2] = n;
        out[blockIdx.x * 5 + 3] = a[k % 40];
    }
    if (threadIdx.x == 1)
        out[blockIdx.x * 5 + 4] = a[(k + 7) % 40];
}

extern "C" __global__ void pt_read_counter(unsigned *out)
{
    *out = pt_counter;
}

/* Calls of device functions nvcc does not inline, and the double sine
 * whose large-argument path is such a call (with carry chains). */
__device__ __noinline__ long long pt_mix(long long a, int b, double *acc)
{
    *acc += (double)b;
    return a * 3 + b;
}

extern "C" __global__ void pt_call(long long *out, double *dout, const double *in, unsigned n)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    double acc = 0.5;
    long long v = (i & 1) ? pt_mix((long long)i, 7, &acc) : -(long long)i;
    out[i] = v + (long long)acc;
    dout[i] = sin(in[i]);
}
