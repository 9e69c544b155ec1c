/* The standard kernels (contract: see DESIGN.md, "Standard kernels"). */

struct vr_affine {
    float *out;
    const float *in;
    float scale;
    float shift;
    unsigned long long n;
};

#define VR_GRID_STRIDE(i, n)                                                   \
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x +  \
                                threadIdx.x;                                   \
         i < (n); i += (unsigned long long)gridDim.x * blockDim.x)

extern "C" __global__ void vr_fill_f32(float *out, float value, unsigned long long n)
{
    VR_GRID_STRIDE(i, n) out[i] = value;
}

extern "C" __global__ void vr_scale_f32(float *out, const float *in, float s, unsigned long long n)
{
    VR_GRID_STRIDE(i, n) out[i] = s * in[i];
}

extern "C" __global__ void vr_axpy_f32(float *y, const float *x, float a, unsigned long long n)
{
    VR_GRID_STRIDE(i, n) y[i] = __fadd_rn(y[i], __fmul_rn(a, x[i]));
}

extern "C" __global__ void vr_add_f32(float *out, const float *a, const float *b, unsigned long long n)
{
    VR_GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

extern "C" __global__ void vr_affine_struct(struct vr_affine p)
{
    VR_GRID_STRIDE(i, p.n) p.out[i] = __fadd_rn(__fmul_rn(p.in[i], p.scale), p.shift);
}

extern "C" __global__ void vr_copy_u8(unsigned char *dst, const unsigned char *src, unsigned long long n)
{
    VR_GRID_STRIDE(i, n) dst[i] = src[i];
}

/* One thread sums the whole range in order (no grid stride: the result is
 * one value, and a fixed order keeps it bit-identical to the host version). */
extern "C" __global__ void vr_sum_range_f32(float *out, const float *begin, const float *end)
{
    if (blockIdx.x || blockIdx.y || blockIdx.z || threadIdx.x || threadIdx.y || threadIdx.z)
        return;
    float s = 0.0f;
    for (const float *p = begin; p < end; p++)
        s = __fadd_rn(s, *p);
    out[0] = s;
}

/* Set-up kernels that build pointer tables (issue 30): element i of table
 * gets p + i floats, and a plain kernel later follows the stored pointers
 * (out[i] = *table[i % m], the table's m entries). */
extern "C" __global__ void vr_store_ptr(unsigned long long *table, const float *p, unsigned long long m)
{
    VR_GRID_STRIDE(i, m) table[i] = (unsigned long long)(p + i);
}

extern "C" __global__ void vr_load_ptr_f32(float *out, const unsigned long long *table, unsigned long long m,
                                           unsigned long long n)
{
    VR_GRID_STRIDE(i, n) out[i] = *(const float *)table[i % m];
}
