// The PTX interpreter benchmark's fixed kernel set (tests/simcuda/ptx_bench.c,
// issue 32 item 2): one kernel per kind of work the interpreter meets, each
// deterministic, so the benchmark's checksums compare one build's results
// with another's.

// Arithmetic: a register-only loop of f32 FMAs and integer mixing.
extern "C" __global__ void bk_arith(float *out, unsigned *uout, unsigned iters)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    float x = (float)(i & 1023) * 0.001f, y = 1.0f, z = 0.5f;
    unsigned h = i * 2654435761u;
    for (unsigned k = 0; k < iters; k++) {
        x = fmaf(x, 0.999f, y);
        y = fmaf(y, -0.5f, z) * 1.0001f;
        z = z + x * 0.25f - y;
        h = (h ^ (h >> 13)) * 5u + k;
        h += (h << 3) & 0xff00ffu;
    }
    out[i] = x + y + z;
    uout[i] = h;
}

// Shared memory with barriers: a block's tree reduction of a grid-stride
// sum (the order is fixed by the shape, so the float sum is too).
extern "C" __global__ void bk_shared(float *out, const float *in, unsigned n)
{
    extern __shared__ float s[];
    unsigned t = threadIdx.x;
    float acc = 0.0f;
    for (unsigned i = blockIdx.x * blockDim.x + t; i < n; i += gridDim.x * blockDim.x)
        acc += in[i];
    s[t] = acc;
    __syncthreads();
    for (unsigned w = blockDim.x / 2; w > 0; w /= 2) {
        if (t < w)
            s[t] += s[t + w];
        __syncthreads();
    }
    if (t == 0)
        out[blockIdx.x] = s[0];
}

// Atomics: a 256-bin histogram in shared memory, merged into global bins
// (integer sums: any order gives the same bytes).
extern "C" __global__ void bk_atomics(unsigned *hist, const unsigned *in, unsigned n)
{
    __shared__ unsigned bins[256];
    for (unsigned b = threadIdx.x; b < 256; b += blockDim.x)
        bins[b] = 0;
    __syncthreads();
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&bins[(in[i] * 2654435761u) >> 24], 1u);
    __syncthreads();
    for (unsigned b = threadIdx.x; b < 256; b += blockDim.x)
        atomicAdd(&hist[b], bins[b]);
}

// Divergent control flow: a data-dependent trip count and branches that
// split every warp.
extern "C" __global__ void bk_diverge(unsigned *out, const unsigned *in, unsigned n)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    unsigned v = in[i] % 1000u + 1u, steps = 0;
    while (v != 1u && steps < 500u) {
        if (v & 1u)
            v = 3u * v + 1u;
        else
            v >>= 1;
        steps++;
    }
    out[i] = (i & 2u) ? steps * 3u : steps ^ 0x55u;
}
