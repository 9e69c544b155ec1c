/*
 * PTX execution (contract: ptx.h): one launch, block after block; a block
 * is warps of 32 lanes, each warp run in lockstep under an active mask
 * until it exits or reaches a barrier, then the next warp; a barrier
 * releases when every warp of the block that still has live threads is
 * waiting in it. Divergence: while the lanes of a warp disagree on the
 * program counter, the lanes with the smallest one run (and reconverge
 * where they meet); a group that reaches a .sync warp operation whose
 * membermask names lanes of another group waits there (parked) until those
 * lanes wait at one too, and the operations then run together. Registers
 * are kept lane-major per register (32 consecutive slots), so an
 * instruction is one loop over the lanes.
 *
 * Compiled with -frounding-math: the rounding modifiers other than .rn
 * switch the host's rounding mode around one operation, and the compiler
 * must not move floating-point work across that switch.
 */
#include "ptx_int.h"
#include "sim.h"

#include <fenv.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { PTX_CALL_DEPTH = 8 };

__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;

struct warp {
    uint64_t *r;      /* nregs * 32 slots */
    uint32_t live;    /* lanes not exited */
    uint32_t pc;      /* while converged */
    uint32_t lpc[32]; /* while diverged */
    uint32_t parked;  /* lanes waiting at a .sync warp operation (at lpc[]) */
    uint32_t need;    /* the lanes they wait for */
    bool div, done, at_bar;
    unsigned id;
    const struct ptx_ins *red; /* waiting in a bar.red: its result goes here */
    uint8_t depth[32];         /* each lane's calls in progress */
    uint8_t cf[32];            /* each lane's carry flag (CC.CF) */
    uint32_t frame[32][PTX_CALL_DEPTH]; /* the calls (indices into k->calls) */
    uint32_t ret_pc[32][PTX_CALL_DEPTH];
};

struct blk {
    const struct ptx_kernel *k;
    const struct ptx_launch *l;
    unsigned char *shared;
    size_t shsize;
    unsigned char *local;
    unsigned ctaid[3];
    unsigned nthreads;
    uint64_t icount;
    /* bar.red of the barrier being gathered: count, and, or */
    uint32_t red_count;
    bool red_and, red_or;
};

static _Noreturn void fault(const struct blk *b, uint32_t pc, const char *what)
{
    fprintf(stderr,
            "simcuda: fatal: kernel %s running on device %d: %s (PTX instruction %u, block "
            "%u,%u,%u): the context is lost, aborting\n",
            b->k->name, b->l->dev, what, pc, b->ctaid[0], b->ctaid[1], b->ctaid[2]);
    fflush(stderr);
    abort();
}

/* A global address a lane computed: the first page is never mapped (as on
 * a GPU, a null pointer faults). One check for every global access path. */
static inline void global_check(const struct blk *b, uint32_t pc, uint64_t a)
{
    if (a < 4096)
        fault(b, pc, "a null pointer dereferenced");
}

/* vprintf(fmt, args) of one lane: its two parameters (generic addresses)
 * are read from where the call sequence stored them. Returns printf()'s
 * value. */
static int32_t device_printf(const struct blk *b, uint32_t pc, const unsigned char *pfmt,
                             const unsigned char *pargs)
{
    uint64_t f, a;
    memcpy(&f, pfmt, sizeof f);
    memcpy(&a, pargs, sizeof a);
    if (f)
        global_check(b, pc, f);
    char *text;
    size_t len;
    int r = ptx_format((const char *)(uintptr_t)f, (const unsigned char *)(uintptr_t)a, &text,
                       &len);
    if (text && b->l->print)
        b->l->print(b->l->print_arg, text, len);
    else if (text)
        fwrite(text, 1, len, stdout);
    sim_free(text);
    return r;
}

#define R(i, l) (w->r[(size_t)(i) * 32u + (unsigned)(l)])
#define LANES for (uint32_t mm_ = em; mm_; mm_ &= mm_ - 1)
#define LANE const int l = __builtin_ctz(mm_)

static inline uint64_t zx(uint64_t v, unsigned bits)
{
    return bits >= 64 ? v : v & ((1ull << bits) - 1);
}

static inline int64_t sx(uint64_t v, unsigned bits)
{
    if (bits >= 64)
        return (int64_t)v;
    unsigned sh = 64 - bits;
    return (int64_t)(v << sh) >> sh;
}

static inline float as_f(uint64_t v)
{
    float f;
    uint32_t u = (uint32_t)v;
    memcpy(&f, &u, 4);
    return f;
}

static inline double as_d(uint64_t v)
{
    double d;
    memcpy(&d, &v, 8);
    return d;
}

static inline uint64_t of_f(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* An f32 result of arithmetic: a NaN is the GPU's one canonical NaN
 * 0x7fffffff (single precision keeps no payload, and no sign), where the
 * host would give 0xffc00000 or propagate an input's payload. f64 needs
 * nothing: its NaNs are the host's (0xfff8000000000000 for 0/0, payloads
 * kept), measured on an H200 (docs/design.md). */
static inline uint64_t of_fc(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return f != f ? 0x7fffffffu : u;
}

static inline uint64_t of_d(double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

static inline float ftzf(float f)
{
    return fpclassify(f) == FP_SUBNORMAL ? copysignf(0.0f, f) : f;
}

static uint64_t sreg(const struct blk *b, const struct warp *w, unsigned id, int lane)
{
    const struct ptx_launch *L = b->l;
    unsigned t = w->id * 32u + (unsigned)lane;
    switch (id) {
    case SR_TID_X: return t % L->block[0];
    case SR_TID_Y: return t / L->block[0] % L->block[1];
    case SR_TID_Z: return t / (L->block[0] * L->block[1]);
    case SR_NTID_X: return L->block[0];
    case SR_NTID_Y: return L->block[1];
    case SR_NTID_Z: return L->block[2];
    case SR_CTAID_X: return b->ctaid[0];
    case SR_CTAID_Y: return b->ctaid[1];
    case SR_CTAID_Z: return b->ctaid[2];
    case SR_NCTAID_X: return L->grid[0];
    case SR_NCTAID_Y: return L->grid[1];
    case SR_NCTAID_Z: return L->grid[2];
    case SR_LANEID: return (unsigned)lane;
    case SR_WARPID: return w->id;
    case SR_NWARPID: return (b->nthreads + 31) / 32;
    case SR_SMID: return 0;
    case SR_NSMID: return 1;
    case SR_GRIDID: return 1;
    case SR_LANEMASK_EQ: return 1u << lane;
    case SR_LANEMASK_LT: return (1u << lane) - 1;
    case SR_LANEMASK_LE: return (uint32_t)((2ull << lane) - 1);
    case SR_LANEMASK_GT: return (uint32_t)~((2ull << lane) - 1);
    case SR_LANEMASK_GE: return (uint32_t)~((1u << lane) - 1);
    case SR_CLOCK: return (uint32_t)b->icount;
    case SR_CLOCK64: return b->icount;
    case SR_GLOBALTIMER: return sim_now_ns();
    case SR_DYN_SMEM: return L->shmem;
    case SR_TOTAL_SMEM: return b->shsize;
    case SR_WARPSZ: return 32;
    default: return 0;
    }
}

/* An operand's value for one lane. */
static inline uint64_t V(const struct blk *b, const struct warp *w, const struct ptx_opnd *o,
                         int l)
{
    if (o->kind == OK_REG)
        return R(o->reg[0], l);
    if (o->kind == OK_IMM)
        return o->imm;
    return sreg(b, w, (unsigned)o->imm, l);
}

/* The host address of `size` bytes at a state-space address. */
static inline unsigned char *addr(const struct blk *b, const struct warp *w, uint32_t pc,
                                  uint8_t space, uint64_t a, size_t size, int l)
{
    switch (space) {
    case SP_SHARED:
        if (a > b->shsize || size > b->shsize - a)
            fault(b, pc, "shared memory access out of bounds");
        return b->shared + a;
    case SP_LOCAL:
        if (a > b->k->local_bytes || size > b->k->local_bytes - a)
            fault(b, pc, "local memory access out of bounds");
        return b->local + (size_t)(w->id * 32u + (unsigned)l) * b->k->local_bytes + a;
    case SP_PARAM:
        if (a > b->l->argsize || size > b->l->argsize - a)
            fault(b, pc, "parameter access out of bounds");
        return (unsigned char *)(uintptr_t)b->l->args + a;
    default:
        global_check(b, pc, a);
        return (unsigned char *)(uintptr_t)a;
    }
}

static int round_mode(uint8_t rnd)
{
    switch (rnd) {
    case RND_RZ: case RND_RZI: return FE_TOWARDZERO;
    case RND_RM: case RND_RMI: return FE_DOWNWARD;
    case RND_RP: case RND_RPI: return FE_UPWARD;
    default: return FE_TONEAREST;
    }
}

/* Floating-point binary/ternary operations under a rounding mode. */
static uint64_t fop(const struct ptx_ins *in, uint64_t a, uint64_t b, uint64_t c)
{
    int mode = round_mode(in->rnd), old = 0;
    if (mode != FE_TONEAREST) {
        old = fegetround();
        fesetround(mode);
    }
    uint64_t r = 0;
    if (in->bits == 32) {
        float x = as_f(a), y = as_f(b), z = as_f(c), v = 0;
        if (in->ftz) {
            x = ftzf(x);
            y = ftzf(y);
            z = ftzf(z);
        }
        switch (in->op) {
        case OP_ADD: v = x + y; break;
        case OP_SUB: v = x - y; break;
        case OP_MUL: v = x * y; break;
        case OP_DIV: v = x / y; break;
        case OP_MAD:
        case OP_FMA: v = fmaf(x, y, z); break;
        case OP_SQRT: v = sqrtf(x); break;
        case OP_RCP: v = 1.0f / x; break;
        case OP_RSQRT: v = 1.0f / sqrtf(x); break;
        case OP_EX2: v = exp2f(x); break;
        case OP_LG2: v = log2f(x); break;
        case OP_SIN: v = sinf(x); break;
        case OP_COS: v = cosf(x); break;
        case OP_TANH: v = tanhf(x); break;
        default: break;
        }
        if (in->ftz)
            v = ftzf(v);
        if (in->sat)
            v = isnan(v) ? 0.0f : v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
        r = of_fc(v);
    } else {
        double x = as_d(a), y = as_d(b), z = as_d(c), v = 0;
        switch (in->op) {
        case OP_ADD: v = x + y; break;
        case OP_SUB: v = x - y; break;
        case OP_MUL: v = x * y; break;
        case OP_DIV: v = x / y; break;
        case OP_MAD:
        case OP_FMA: v = fma(x, y, z); break;
        case OP_SQRT: v = sqrt(x); break;
        case OP_RCP: v = 1.0 / x; break;
        case OP_RSQRT: v = 1.0 / sqrt(x); break;
        case OP_EX2: v = exp2(x); break;
        case OP_LG2: v = log2(x); break;
        case OP_SIN: v = sin(x); break;
        case OP_COS: v = cos(x); break;
        case OP_TANH: v = tanh(x); break;
        default: break;
        }
        if (in->sat)
            v = isnan(v) ? 0.0 : v < 0.0 ? 0.0 : v > 1.0 ? 1.0 : v;
        r = of_d(v);
    }
    if (mode != FE_TONEAREST)
        fesetround(old);
    return r;
}

static bool fcmp(uint8_t cmp, double x, double y)
{
    bool un = isnan(x) || isnan(y);
    switch (cmp) {
    case CMP_EQ: return !un && x == y;
    case CMP_NE: return !un && x != y;
    case CMP_LT: return !un && x < y;
    case CMP_LE: return !un && x <= y;
    case CMP_GT: return !un && x > y;
    case CMP_GE: return !un && x >= y;
    case CMP_EQU: return un || x == y;
    case CMP_NEU: return un || x != y;
    case CMP_LTU: return un || x < y;
    case CMP_LEU: return un || x <= y;
    case CMP_GTU: return un || x > y;
    case CMP_GEU: return un || x >= y;
    case CMP_NUM: return !un;
    case CMP_NAN: return un;
    default: return false;
    }
}

static bool icmp(uint8_t cmp, bool sgn, uint64_t a, uint64_t b, unsigned bits)
{
    if (sgn) {
        int64_t x = sx(a, bits), y = sx(b, bits);
        switch (cmp) {
        case CMP_EQ: return x == y;
        case CMP_NE: return x != y;
        case CMP_LT: return x < y;
        case CMP_LE: return x <= y;
        case CMP_GT: return x > y;
        case CMP_GE: return x >= y;
        default: return false;
        }
    }
    uint64_t x = zx(a, bits), y = zx(b, bits);
    switch (cmp) {
    case CMP_EQ: return x == y;
    case CMP_NE: return x != y;
    case CMP_LT: return x < y;
    case CMP_LE: return x <= y;
    case CMP_GT: return x > y;
    case CMP_GE: return x >= y;
    default: return false;
    }
}

/* cvt: every combination of integer and float types. */
static uint64_t cvt(const struct ptx_ins *in, uint64_t v)
{
    unsigned db = in->bits, sb = in->sbits;
    if (in->sty != TY_F && in->ty != TY_F) {
        if (in->sat) {
            int64_t lo, hi;
            bool ssrc = in->sty == TY_S;
            if (in->ty == TY_S) {
                hi = db >= 64 ? INT64_MAX : (int64_t)((1ull << (db - 1)) - 1);
                lo = -hi - 1;
            } else {
                lo = 0;
                hi = db >= 64 ? INT64_MAX : (int64_t)((1ull << db) - 1);
            }
            if (ssrc) {
                int64_t x = sx(v, sb);
                x = x < lo ? lo : x > hi ? hi : x;
                return in->ty == TY_S ? (uint64_t)x : zx((uint64_t)x, db);
            }
            uint64_t x = zx(v, sb);
            if (x > (uint64_t)hi && !(db == 64 && in->ty != TY_S))
                x = (uint64_t)hi;
            return zx(x, db);
        }
        /* chopped to the destination type, then extended as that type says
         * (a signed one sign-extends into the wider register, as ld does) */
        uint64_t x = in->sty == TY_S ? (uint64_t)sx(v, sb) : zx(v, sb);
        return in->ty == TY_S ? (uint64_t)sx(x, db) : zx(x, db);
    }
    int mode = round_mode(in->rnd), old = 0;
    if (mode != FE_TONEAREST) {
        old = fegetround();
        fesetround(mode);
    }
    uint64_t r;
    if (in->sty == TY_F && in->ty == TY_F) {
        double x = sb == 32 ? (double)(in->ftz ? ftzf(as_f(v)) : as_f(v)) : as_d(v);
        if (in->rnd >= RND_RNI)
            x = in->rnd == RND_RNI ? nearbyint(x) : in->rnd == RND_RZI ? trunc(x)
                : in->rnd == RND_RMI ? floor(x) : ceil(x);
        if (db == 32) {
            float f = sb == 32 && in->rnd >= RND_RNI
                          ? (float)x
                          : sb == 32 ? as_f(v) : (float)x; /* one rounding, in mode */
            if (sb == 32 && in->rnd >= RND_RNI)
                f = (float)x;
            if (in->ftz)
                f = ftzf(f);
            if (in->sat)
                f = isnan(f) ? 0.0f : f < 0.0f ? 0.0f : f > 1.0f ? 1.0f : f;
            /* a NaN: from f32 the canonical one, from f64 as the host
             * converts it (what an H200 gives for each) */
            r = sb == 32 ? of_fc(f) : of_f(f);
        } else {
            if (in->sat)
                x = isnan(x) ? 0.0 : x < 0.0 ? 0.0 : x > 1.0 ? 1.0 : x;
            r = of_d(x);
        }
    } else if (in->ty == TY_F) { /* integer to float */
        if (db == 32) {
            float f = in->sty == TY_S ? (float)sx(v, sb) : (float)zx(v, sb);
            if (in->sat)
                f = f < 0.0f ? 0.0f : f > 1.0f ? 1.0f : f;
            r = of_f(f);
        } else {
            double d = in->sty == TY_S ? (double)sx(v, sb) : (double)zx(v, sb);
            if (in->sat)
                d = d < 0.0 ? 0.0 : d > 1.0 ? 1.0 : d;
            r = of_d(d);
        }
    } else { /* float to integer: rounded, then saturated; NaN is 0 */
        double x = sb == 32 ? (double)(in->ftz ? ftzf(as_f(v)) : as_f(v)) : as_d(v);
        x = in->rnd == RND_RNI ? nearbyint(x) : in->rnd == RND_RMI ? floor(x)
            : in->rnd == RND_RPI ? ceil(x) : trunc(x);
        if (isnan(x)) {
            r = 0;
        } else if (in->ty == TY_S) {
            double hi = ldexp(1.0, (int)db - 1);
            int64_t m = db >= 64 ? INT64_MAX : (int64_t)((1ull << (db - 1)) - 1);
            int64_t y = x >= hi ? m : x < -hi ? -m - 1 : (int64_t)x;
            r = (uint64_t)y; /* sign-extended, as the integer conversions */
        } else {
            double hi = ldexp(1.0, (int)db);
            uint64_t y = x <= 0 ? 0 : x >= hi ? zx(~0ull, db) : (uint64_t)x;
            r = y;
        }
    }
    if (mode != FE_TONEAREST)
        fesetround(old);
    return r;
}

static uint64_t atomic_rmw(const struct blk *b, uint32_t pc, const struct ptx_ins *in,
                           unsigned char *p, uint64_t x, uint64_t y)
{
    if ((uintptr_t)p % (in->bits / 8))
        fault(b, pc, "misaligned atomic");
    if (in->bits == 32) {
        uint32_t *q = (uint32_t *)(void *)p;
        uint32_t v = (uint32_t)x;
        switch (in->sub) {
        case SUB_A_ADD:
            if (in->ty == TY_F) {
                uint32_t old = __atomic_load_n(q, __ATOMIC_RELAXED), nw;
                do
                    nw = (uint32_t)of_fc(as_f(old) + as_f(v));
                while (!__atomic_compare_exchange_n(q, &old, nw, false, __ATOMIC_SEQ_CST,
                                                    __ATOMIC_RELAXED));
                return old;
            }
            return __atomic_fetch_add(q, v, __ATOMIC_SEQ_CST);
        case SUB_A_AND: return __atomic_fetch_and(q, v, __ATOMIC_SEQ_CST);
        case SUB_A_OR: return __atomic_fetch_or(q, v, __ATOMIC_SEQ_CST);
        case SUB_A_XOR: return __atomic_fetch_xor(q, v, __ATOMIC_SEQ_CST);
        case SUB_A_EXCH: return __atomic_exchange_n(q, v, __ATOMIC_SEQ_CST);
        case SUB_A_CAS: {
            uint32_t old = v;
            __atomic_compare_exchange_n(q, &old, (uint32_t)y, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST);
            return old;
        }
        default: {
            uint32_t old = __atomic_load_n(q, __ATOMIC_RELAXED), nw = 0;
            do {
                switch (in->sub) {
                case SUB_A_MIN:
                    nw = in->ty == TY_S ? ((int32_t)old < (int32_t)v ? old : v)
                                        : (old < v ? old : v);
                    break;
                case SUB_A_MAX:
                    nw = in->ty == TY_S ? ((int32_t)old > (int32_t)v ? old : v)
                                        : (old > v ? old : v);
                    break;
                case SUB_A_INC: nw = old >= v ? 0 : old + 1; break;
                case SUB_A_DEC: nw = (old == 0 || old > v) ? v : old - 1; break;
                default: break;
                }
            } while (!__atomic_compare_exchange_n(q, &old, nw, false, __ATOMIC_SEQ_CST,
                                                  __ATOMIC_RELAXED));
            return old;
        }
        }
    }
    uint64_t *q = (uint64_t *)(void *)p;
    switch (in->sub) {
    case SUB_A_ADD:
        if (in->ty == TY_F) {
            uint64_t old = __atomic_load_n(q, __ATOMIC_RELAXED), nw;
            do
                nw = of_d(as_d(old) + as_d(x));
            while (!__atomic_compare_exchange_n(q, &old, nw, false, __ATOMIC_SEQ_CST,
                                                __ATOMIC_RELAXED));
            return old;
        }
        return __atomic_fetch_add(q, x, __ATOMIC_SEQ_CST);
    case SUB_A_AND: return __atomic_fetch_and(q, x, __ATOMIC_SEQ_CST);
    case SUB_A_OR: return __atomic_fetch_or(q, x, __ATOMIC_SEQ_CST);
    case SUB_A_XOR: return __atomic_fetch_xor(q, x, __ATOMIC_SEQ_CST);
    case SUB_A_EXCH: return __atomic_exchange_n(q, x, __ATOMIC_SEQ_CST);
    case SUB_A_CAS: {
        uint64_t old = x;
        __atomic_compare_exchange_n(q, &old, y, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
        return old;
    }
    default: {
        uint64_t old = __atomic_load_n(q, __ATOMIC_RELAXED), nw = 0;
        do {
            switch (in->sub) {
            case SUB_A_MIN:
                nw = in->ty == TY_S ? ((int64_t)old < (int64_t)x ? old : x) : (old < x ? old : x);
                break;
            case SUB_A_MAX:
                nw = in->ty == TY_S ? ((int64_t)old > (int64_t)x ? old : x) : (old > x ? old : x);
                break;
            case SUB_A_INC: nw = old >= x ? 0 : old + 1; break;
            case SUB_A_DEC: nw = (old == 0 || old > x) ? x : old - 1; break;
            default: break;
            }
        } while (!__atomic_compare_exchange_n(q, &old, nw, false, __ATOMIC_SEQ_CST,
                                              __ATOMIC_RELAXED));
        return old;
    }
    }
}

static uint64_t int_binop(const struct ptx_ins *in, uint64_t a, uint64_t b, uint64_t c)
{
    unsigned bits = in->bits;
    bool s = in->ty == TY_S;
    switch (in->op) {
    case OP_ADD:
        if (in->sat) {
            int64_t r = sx(a, 32) + sx(b, 32);
            r = r > INT32_MAX ? INT32_MAX : r < INT32_MIN ? INT32_MIN : r;
            return zx((uint64_t)r, 32);
        }
        return zx(a + b, bits);
    case OP_SUB:
        if (in->sat) {
            int64_t r = sx(a, 32) - sx(b, 32);
            r = r > INT32_MAX ? INT32_MAX : r < INT32_MIN ? INT32_MIN : r;
            return zx((uint64_t)r, 32);
        }
        return zx(a - b, bits);
    case OP_MUL:
    case OP_MAD: {
        uint64_t r;
        if (in->sub == SUB_WIDE) {
            r = s ? (uint64_t)(sx(a, bits) * sx(b, bits)) : zx(a, bits) * zx(b, bits);
            if (in->op == OP_MAD)
                r += c;
            return zx(r, bits * 2);
        }
        if (in->sub == SUB_HI) {
            if (bits == 64) {
                r = s ? (uint64_t)((i128)(int64_t)a * (int64_t)b >> 64)
                      : (uint64_t)((u128)a * b >> 64);
            } else {
                uint64_t p = s ? (uint64_t)(sx(a, bits) * sx(b, bits)) : zx(a, bits) * zx(b, bits);
                r = s ? (uint64_t)((int64_t)p >> bits) : p >> bits;
            }
        } else {
            r = a * b;
        }
        if (in->op == OP_MAD)
            r += c;
        return zx(r, bits);
    }
    case OP_DIV:
        if (s) {
            int64_t x = sx(a, bits), y = sx(b, bits);
            if (y == 0)
                return zx(~0ull, bits);
            if (y == -1)
                return zx((uint64_t)0 - (uint64_t)x, bits);
            return zx((uint64_t)(x / y), bits);
        } else {
            uint64_t x = zx(a, bits), y = zx(b, bits);
            return y ? x / y : zx(~0ull, bits);
        }
    case OP_REM:
        if (s) {
            int64_t x = sx(a, bits), y = sx(b, bits);
            if (y == 0)
                return zx((uint64_t)x, bits);
            if (y == -1)
                return 0;
            return zx((uint64_t)(x % y), bits);
        } else {
            uint64_t x = zx(a, bits), y = zx(b, bits);
            return y ? x % y : x;
        }
    case OP_MIN:
        if (s)
            return sx(a, bits) < sx(b, bits) ? zx(a, bits) : zx(b, bits);
        return zx(a, bits) < zx(b, bits) ? zx(a, bits) : zx(b, bits);
    case OP_MAX:
        if (s)
            return sx(a, bits) > sx(b, bits) ? zx(a, bits) : zx(b, bits);
        return zx(a, bits) > zx(b, bits) ? zx(a, bits) : zx(b, bits);
    case OP_AND: return a & b;
    case OP_OR: return a | b;
    case OP_XOR: return zx(a ^ b, bits);
    case OP_SHL: {
        uint32_t n = (uint32_t)b;
        return n >= bits ? 0 : zx(a << n, bits);
    }
    case OP_SHR: {
        uint32_t n = (uint32_t)b;
        if (s)
            return zx((uint64_t)(sx(a, bits) >> (n >= bits ? bits - 1 : n)), bits);
        return n >= bits ? 0 : zx(a, bits) >> n;
    }
    case OP_MUL24:
    case OP_MAD24: {
        int64_t x = s ? sx(a, 24) : (int64_t)zx(a, 24), y = s ? sx(b, 24) : (int64_t)zx(b, 24);
        uint64_t r = (uint64_t)(x * y);
        if (in->sub == SUB_HI) /* bits 47..16 of the 48-bit product */
            r = (uint64_t)((x * y) >> 16);
        if (in->op == OP_MAD24)
            r += c;
        return zx(r, 32);
    }
    default:
        return 0;
    }
}

/* One lane's result of the simple (non-memory, non-warp) instructions. */
static uint64_t alu(const struct blk *b, const struct warp *w, const struct ptx_ins *in, int l)
{
    const unsigned bits = in->bits;
    uint64_t a = in->nops > 1 ? V(b, w, &in->o[1], l) : 0;
    uint64_t c2 = in->nops > 2 ? V(b, w, &in->o[2], l) : 0;
    uint64_t c3 = in->nops > 3 ? V(b, w, &in->o[3], l) : 0;
    switch (in->op) {
    /* abs and neg of a NaN, as an H200: f32 gives the canonical NaN, f64
     * the NaN quieted with its sign and payload kept */
    case OP_ABS:
        if (in->ty == TY_F)
            return bits == 32 ? (isnan(as_f(a)) ? 0x7fffffffu
                                 : in->ftz ? of_f(ftzf(fabsf(as_f(a)))) : (a & 0x7fffffffu))
                              : isnan(as_d(a)) ? a | 0x0008000000000000ull
                                               : a & 0x7fffffffffffffffull;
        return zx((uint64_t)(sx(a, bits) < 0 ? -sx(a, bits) : sx(a, bits)), bits);
    case OP_NEG:
        if (in->ty == TY_F)
            return bits == 32 ? (isnan(as_f(a)) ? 0x7fffffffu
                                 : in->ftz ? of_f(ftzf(-as_f(a))) : (a ^ 0x80000000u))
                              : isnan(as_d(a)) ? a | 0x0008000000000000ull
                                               : a ^ 0x8000000000000000ull;
        return zx(0 - a, bits);
    case OP_NOT:
        return in->ty == TY_PRED ? !a : zx(~a, bits);
    case OP_CNOT:
        return zx(a, bits) == 0;
    case OP_POPC:
        return (uint64_t)__builtin_popcountll(zx(a, bits));
    case OP_CLZ:
        return zx(a, bits) ? (uint64_t)(__builtin_clzll(zx(a, bits)) - (64 - (int)bits)) : bits;
    case OP_BREV: {
        uint64_t r = 0, x = zx(a, bits);
        for (unsigned i = 0; i < bits; i++)
            r |= ((x >> i) & 1) << (bits - 1 - i);
        return r;
    }
    case OP_BFE: {
        unsigned pos = (unsigned)(c2 & 0xff), len = (unsigned)(c3 & 0xff);
        uint64_t x = zx(a, bits);
        uint64_t r = 0;
        for (unsigned i = 0; i < bits; i++) {
            uint64_t bit;
            if (i < len && pos + i < bits)
                bit = (x >> (pos + i)) & 1;
            else if (in->ty == TY_S)
                bit = len == 0 ? 0 : (x >> (pos + len - 1 < bits ? pos + len - 1 : bits - 1)) & 1;
            else
                bit = 0;
            r |= bit << i;
        }
        return r;
    }
    case OP_BFI: {
        uint64_t c4 = V(b, w, &in->o[4], l);
        unsigned pos = (unsigned)(c3 & 0xff), len = (unsigned)(c4 & 0xff);
        uint64_t r = zx(c2, bits);
        for (unsigned i = 0; i < len && pos + i < bits; i++)
            r = (r & ~(1ull << (pos + i))) | (((a >> i) & 1) << (pos + i));
        return r;
    }
    case OP_LOP3: {
        uint64_t lut = V(b, w, &in->o[4], l), r = 0;
        for (unsigned k = 0; k < 8; k++)
            if (lut >> k & 1)
                r |= ((k & 4) ? a : ~a) & ((k & 2) ? c2 : ~c2) & ((k & 1) ? c3 : ~c3);
        return zx(r, bits);
    }
    case OP_PRMT: {
        uint64_t bytes = zx(a, 32) | zx(c2, 32) << 32, r = 0;
        for (unsigned i = 0; i < 4; i++) {
            unsigned sel = (unsigned)(c3 >> (4 * i)) & 0xf;
            uint64_t byte = bytes >> (8 * (sel & 7)) & 0xff;
            if (sel & 8)
                byte = byte & 0x80 ? 0xff : 0;
            r |= byte << (8 * i);
        }
        return r;
    }
    case OP_SELP:
        return c3 ? a : c2;
    case OP_COPYSIGN:
        if (bits == 32)
            return (c2 & 0x7fffffffu) | (a & 0x80000000u);
        return (c2 & 0x7fffffffffffffffull) | (a & 0x8000000000000000ull);
    case OP_MIN:
    case OP_MAX:
        if (in->ty == TY_F) {
            if (bits == 32) {
                float x = as_f(a), y = as_f(c2);
                if (in->ftz) {
                    x = ftzf(x);
                    y = ftzf(y);
                }
                /* one NaN operand (signaling or not): the other, as an
                 * H200 (the host's fminf quiets a signaling one into the
                 * result); both: the canonical NaN */
                if (isnan(x) || isnan(y))
                    return of_fc(isnan(x) ? y : x);
                return of_f(in->op == OP_MIN ? fminf(x, y) : fmaxf(x, y));
            }
            return of_d(in->op == OP_MIN ? fmin(as_d(a), as_d(c2)) : fmax(as_d(a), as_d(c2)));
        }
        return int_binop(in, a, c2, 0);
    case OP_CVT:
        return cvt(in, a);
    default:
        if (in->ty == TY_F)
            return fop(in, a, c2, c3);
        return int_binop(in, a, c2, c3);
    }
}

/* The warp operations (shfl, vote, match, redux, bar.warp.sync) for the
 * lanes of em, lane l running instruction li[l] (the same one, or, for lanes
 * that reached the operation from different branches, one with the same
 * qualifiers: each lane's operands are its own instruction's). */
static void warp_op(const struct blk *b, struct warp *w, const struct ptx_ins *const *li,
                    uint32_t em)
{
    const struct ptx_ins *in = li[__builtin_ctz(em)];
    switch (in->op) {
    case OP_SHFL: {
        /* a lane outside em is read through the first lane's instruction */
        uint64_t val[32];
        for (int l = 0; l < 32; l++)
            val[l] = in->o[1].kind == OK_REG ? R(in->o[1].reg[0], l) : in->o[1].imm;
        LANES {
            LANE;
            const struct ptx_opnd *a = &li[l]->o[1];
            val[l] = a->kind == OK_REG ? R(a->reg[0], l) : a->imm;
        }
        uint64_t outv[32];
        bool pv[32];
        LANES {
            LANE;
            const struct ptx_opnd *o = li[l]->o;
            uint32_t bv = (uint32_t)V(b, w, &o[2], l), cv = (uint32_t)V(b, w, &o[3], l);
            uint32_t seg = (cv >> 8) & 0x1f, clamp = cv & 0x1f;
            uint32_t minl = (uint32_t)l & seg, maxl = minl | (clamp & ~seg);
            int64_t j = 0;
            bool ok = false;
            switch (in->sub) {
            case SUB_UP: j = l - (int64_t)bv; ok = j >= (int64_t)maxl; break;
            case SUB_DOWN: j = l + (int64_t)bv; ok = j <= (int64_t)maxl; break;
            case SUB_BFLY: j = l ^ (int64_t)bv; ok = j <= (int64_t)maxl; break;
            default: j = minl | (bv & 0x1f & ~seg); ok = j <= (int64_t)maxl; break;
            }
            if (!ok)
                j = l;
            outv[l] = zx(val[j], 32);
            pv[l] = ok;
        }
        LANES {
            LANE;
            const struct ptx_opnd *o = li[l]->o;
            if (o[0].kind == OK_REG)
                R(o[0].reg[0], l) = outv[l];
            if (o[5].kind == OK_REG)
                R(o[5].reg[0], l) = pv[l];
        }
        break;
    }
    case OP_VOTE: {
        uint32_t ballot = 0;
        LANES {
            LANE;
            const struct ptx_opnd *p = &li[l]->o[1];
            ballot |= (uint32_t)((V(b, w, p, l) != 0) ^ p->neg) << l;
        }
        uint64_t r = 0;
        switch (in->sub) {
        case SUB_ALL: r = ballot == em; break;
        case SUB_ANY: r = ballot != 0; break;
        case SUB_UNI: r = ballot == 0 || ballot == em; break;
        default: r = ballot; break;
        }
        LANES {
            LANE;
            R(li[l]->o[0].reg[0], l) = r;
        }
        break;
    }
    case OP_MATCH: {
        uint64_t v[32];
        LANES {
            LANE;
            v[l] = zx(V(b, w, &li[l]->o[1], l), in->bits);
        }
        uint32_t same[32];
        bool all = true;
        LANES {
            LANE;
            uint32_t s = 0;
            for (uint32_t m2 = em; m2; m2 &= m2 - 1) {
                int j = __builtin_ctz(m2);
                s |= (uint32_t)(v[j] == v[l]) << j;
            }
            same[l] = s;
            all = all && s == em;
        }
        LANES {
            LANE;
            const struct ptx_opnd *o = li[l]->o;
            R(o[0].reg[0], l) = in->sub == SUB_ANY ? same[l] : (all ? em : 0);
            if (o[5].kind == OK_REG)
                R(o[5].reg[0], l) = all;
        }
        break;
    }
    case OP_REDUX: {
        /* over the lanes taking part; .add wraps to 32 bits */
        const bool sg = in->ty == TY_S;
        uint32_t r = 0;
        bool first = true;
        LANES {
            LANE;
            uint32_t x = (uint32_t)V(b, w, &li[l]->o[1], l);
            if (first) {
                r = x;
                first = false;
                continue;
            }
            switch (in->sub) {
            case SUB_A_ADD: r += x; break;
            case SUB_A_MIN: r = (sg ? (int32_t)x < (int32_t)r : x < r) ? x : r; break;
            case SUB_A_MAX: r = (sg ? (int32_t)x > (int32_t)r : x > r) ? x : r; break;
            case SUB_A_AND: r &= x; break;
            case SUB_A_OR: r |= x; break;
            default: r ^= x; break;
            }
        }
        LANES {
            LANE;
            R(li[l]->o[0].reg[0], l) = r;
        }
        break;
    }
    default: /* bar.warp.sync: the wait is all it does */
        break;
    }
}

/* Runs the .sync warp operations the parked lanes wait at, together (lanes
 * at instructions of different kinds or qualifiers apart), and moves each
 * parked lane past its instruction. */
static void sync_release(const struct blk *b, struct warp *w)
{
    const struct ptx_ins *ins = b->k->ins;
    const uint32_t parked = w->parked & w->live;
    for (uint32_t left = parked; left;) {
        const struct ptx_ins *first = &ins[w->lpc[__builtin_ctz(left)]];
        const struct ptx_ins *li[32];
        uint32_t cls = 0, em = 0;
        for (uint32_t mm = left; mm; mm &= mm - 1) {
            int l = __builtin_ctz(mm);
            const struct ptx_ins *in = &ins[w->lpc[l]];
            if (in->op != first->op || in->sub != first->sub || in->ty != first->ty ||
                in->bits != first->bits)
                continue;
            cls |= 1u << l;
            li[l] = in;
            if (in->guard < 0 || ((R(in->guard, l) != 0) ^ in->guard_neg))
                em |= 1u << l;
        }
        if (em)
            warp_op(b, w, li, em);
        left &= ~cls;
    }
    for (uint32_t mm = parked; mm; mm &= mm - 1)
        w->lpc[__builtin_ctz(mm)]++;
    w->parked = w->need = 0;
}

/* The specialised instructions (ptx_prepare picks them; each must compute
 * exactly what the general path below computes for it). R: a register
 * operand, I: an immediate. */
enum ptx_fast {
    F_NONE,
    F_MOV_R, F_MOV_I,
    F_IADD_RR, F_IADD_RI, F_ISUB_RR, F_ISUB_RI,
    F_IMUL_RR, F_IMUL_RI, F_IMAD_RRR,
    F_AND_RR, F_AND_RI, F_OR_RR, F_OR_RI, F_XOR_RR, F_XOR_RI,
    F_SHL_RI, F_SHR_RI, F_SAR_RI,
    F_CVT_II, F_GLOBAL_R, F_IMULW_RR, F_IMULW_RI, F_UMULW_RR, F_UMULW_RI,
    F_SETP_U, F_SETP_S,
    F_F32_ADD, F_F32_SUB, F_F32_MUL, F_F32_FMA,
    F_F64_ADD, F_F64_SUB, F_F64_MUL, F_F64_FMA,
    F_LDG, F_STG, F_LDPARAM, F_MOV_S, F_SELP,
    F_CVT_FF, F_CVT_FI, F_SHFL, F_LDS, F_STS,
};

static bool is_reg(const struct ptx_opnd *o)
{
    return o->kind == OK_REG;
}

static bool is_ri(const struct ptx_opnd *o)
{
    return o->kind == OK_REG || o->kind == OK_IMM;
}

static bool bits_le32(const struct ptx_ins *in)
{
    return in->bits <= 32;
}

static uint8_t pick_fast(const struct ptx_ins *in)
{
    const struct ptx_opnd *o = in->o;
    const bool plain = !in->sat && !in->cc && !in->ftz;
    const bool rn = in->rnd == RND_NONE || in->rnd == RND_RN;
    if (in->op == OP_LD || in->op == OP_ST) {
        const struct ptx_opnd *a = &o[in->op == OP_LD ? 1 : 0], *v = &o[in->op == OP_LD ? 0 : 1];
        unsigned es = in->bits / 8u;
        if (in->op == OP_LD && in->space == SP_PARAM && !in->vec && a->kind == OK_ADDR &&
            !a->has_base && is_reg(v) && in->bits % 8 == 0 && in->bits <= 64)
            return F_LDPARAM; /* the same bytes for every lane */
        if (!in->vec && a->kind == OK_ADDR && a->has_base && is_reg(v) &&
            (in->space == SP_GLOBAL || in->space == SP_GENERIC) &&
            (es == 1 || es == 2 || es == 4 || es == 8) && in->bits % 8 == 0)
            return in->op == OP_LD ? F_LDG : F_STG;
        if (!in->vec && a->kind == OK_ADDR && a->has_base && is_reg(v) && in->space == SP_SHARED &&
            (es == 1 || es == 2 || es == 4 || es == 8) && in->bits % 8 == 0)
            return in->op == OP_LD ? F_LDS : F_STS;
        return F_NONE;
    }
    if (in->op == OP_SHFL) /* the value, lane and clamp operands in registers */
        return (is_reg(&o[0]) || o[0].kind == OK_SINK) && is_reg(&o[1]) && is_reg(&o[2]) &&
                       is_reg(&o[3]) && (is_reg(&o[5]) || o[5].kind == OK_NONE ||
                                         o[5].kind == OK_SINK)
                   ? F_SHFL : F_NONE;
    if (in->nops < 2 || !is_reg(&o[0]))
        return F_NONE;
    if (in->op == OP_MOV)
        return in->nops == 2 ? (is_reg(&o[1]) ? F_MOV_R : o[1].kind == OK_IMM ? F_MOV_I
                                : o[1].kind == OK_SREG ? F_MOV_S : F_NONE)
                             : F_NONE;
    if (in->op == OP_CVTA || in->op == OP_CVTA_TO) /* global: the same address */
        return in->nops == 2 && is_reg(&o[1]) && in->space != SP_SHARED &&
                       in->space != SP_LOCAL && in->space != SP_PARAM
                   ? F_GLOBAL_R : F_NONE;
    if (in->op == OP_CVT) {
        if (in->nops != 2 || !is_reg(&o[1]) || in->sat)
            return F_NONE;
        if (in->ty != TY_F && in->sty != TY_F)
            return F_CVT_II;
        /* f32 <-> f64 and integer to float in the default rounding: one
         * host conversion (f32 to f64 is exact, NaNs quieted as cvt() does) */
        const bool fw = (in->bits == 32 || in->bits == 64) && rn && !in->ftz;
        if (fw && in->ty == TY_F && in->sty == TY_F && in->bits != in->sbits &&
            (in->sbits == 32 || in->sbits == 64))
            return F_CVT_FF;
        if (fw && in->ty == TY_F && in->sty != TY_F && in->sty != TY_PRED)
            return F_CVT_FI;
        return F_NONE;
    }
    if (in->op == OP_SETP)
        return in->ty != TY_F && in->sty != TY_F && in->sub == SUB_NONE &&
                       o[5].kind == OK_NONE && in->nops == 3 && is_reg(&o[1]) && is_ri(&o[2]) &&
                       in->cmp <= CMP_GE
                   ? (in->sty == TY_S ? F_SETP_S : F_SETP_U) : F_NONE;
    if (in->op == OP_SELP)
        return in->nops == 4 && is_reg(&o[1]) && is_reg(&o[2]) && is_reg(&o[3]) && !o[3].neg
                   ? F_SELP : F_NONE;
    if (in->ty == TY_F) {
        if (!plain || !rn || in->nops < 3 || !is_reg(&o[1]) || !is_reg(&o[2]) ||
            (in->bits != 32 && in->bits != 64))
            return F_NONE;
        bool d = in->bits == 64;
        switch (in->op) {
        case OP_ADD: return in->nops == 3 ? (d ? F_F64_ADD : F_F32_ADD) : F_NONE;
        case OP_SUB: return in->nops == 3 ? (d ? F_F64_SUB : F_F32_SUB) : F_NONE;
        case OP_MUL: return in->nops == 3 ? (d ? F_F64_MUL : F_F32_MUL) : F_NONE;
        case OP_MAD:
        case OP_FMA:
            return in->nops == 4 && is_reg(&o[3]) ? (d ? F_F64_FMA : F_F32_FMA) : F_NONE;
        default: return F_NONE;
        }
    }
    if (in->ty == TY_PRED)
        return (in->op == OP_AND || in->op == OP_OR) && in->nops == 3 && is_reg(&o[1]) &&
                       is_reg(&o[2]) && !o[1].neg && !o[2].neg
                   ? (in->op == OP_AND ? F_AND_RR : F_OR_RR) : F_NONE;
    if (in->sat || in->cc || in->nops != 3 + (in->op == OP_MAD) ||
        !is_reg(&o[1]) || !is_ri(&o[2]))
        return F_NONE;
    const bool ri = o[2].kind == OK_IMM;
    switch (in->op) {
    case OP_ADD: return ri ? F_IADD_RI : F_IADD_RR;
    case OP_SUB: return ri ? F_ISUB_RI : F_ISUB_RR;
    case OP_MUL:
        if (in->sub == SUB_WIDE)
            return bits_le32(in) ? (in->ty == TY_S ? (ri ? F_IMULW_RI : F_IMULW_RR)
                                                    : (ri ? F_UMULW_RI : F_UMULW_RR))
                                 : F_NONE;
        return in->sub == SUB_NONE || in->sub == SUB_LO ? (ri ? F_IMUL_RI : F_IMUL_RR) : F_NONE;
    case OP_MAD:
        return (in->sub == SUB_NONE || in->sub == SUB_LO) && !ri && is_reg(&o[3]) ? F_IMAD_RRR
                                                                                  : F_NONE;
    case OP_AND: return ri ? F_AND_RI : F_AND_RR;
    case OP_OR: return ri ? F_OR_RI : F_OR_RR;
    case OP_XOR: return ri ? F_XOR_RI : F_XOR_RR;
    case OP_SHL: return ri && o[2].imm < in->bits ? F_SHL_RI : F_NONE;
    case OP_SHR:
        return ri && o[2].imm < in->bits ? (in->ty == TY_S ? F_SAR_RI : F_SHR_RI) : F_NONE;
    default: return F_NONE;
    }
}

/* The immediate operands first..last of in as constant registers (false:
 * the kernel has PTX_MAX_CONSTS distinct ones already; in keeps them). */
static bool const_regs(struct ptx_kernel *k, struct ptx_ins *in, unsigned first, unsigned last)
{
    uint32_t idx[6];
    for (unsigned i = first; i <= last; i++) {
        if (in->o[i].kind != OK_IMM)
            continue;
        uint32_t c = 0;
        while (c < k->nconst && k->cval[c] != in->o[i].imm)
            c++;
        if (c == k->nconst) {
            if (c == PTX_MAX_CONSTS)
                return false;
            k->cval[k->nconst++] = in->o[i].imm;
        }
        idx[i] = c;
    }
    for (unsigned i = first; i <= last; i++)
        if (in->o[i].kind == OK_IMM) {
            in->o[i].kind = OK_REG;
            in->o[i].reg[0] = k->creg0 + idx[i];
        }
    return true;
}

/* Instructions whose specialised loop wants register operands only: float
 * arithmetic, integer mad, selp. An immediate reads the same as a
 * constant register holding it (V()), so the slow paths see no change. */
static void prepare_consts(struct ptx_kernel *k, struct ptx_ins *in)
{
    const bool rn = in->rnd == RND_NONE || in->rnd == RND_RN;
    const bool plain = !in->sat && !in->cc && !in->ftz;
    if (in->nops < 3 || in->o[0].kind != OK_REG)
        return;
    if (in->ty == TY_F && plain && rn && (in->bits == 32 || in->bits == 64) &&
        (in->op == OP_ADD || in->op == OP_SUB || in->op == OP_MUL ||
         ((in->op == OP_MAD || in->op == OP_FMA) && in->nops == 4)))
        const_regs(k, in, 1, in->nops - 1u);
    else if (in->op == OP_MAD && in->ty != TY_F && in->ty != TY_PRED && !in->cc && !in->sat &&
             (in->sub == SUB_NONE || in->sub == SUB_LO) && in->nops == 4)
        const_regs(k, in, 2, 3);
    else if (in->op == OP_SELP && in->nops == 4 && in->o[3].kind == OK_REG && !in->o[3].neg)
        const_regs(k, in, 1, 2);
    else if (in->op == OP_SHFL && in->o[1].kind == OK_REG)
        const_regs(k, in, 2, 3);
}

/* Whether register r appears in an operand or guard of any instruction
 * but at's destination. */
static bool reg_mentioned(const struct ptx_kernel *k, const struct ptx_ins *at, uint32_t r)
{
    for (size_t i = 0; i < k->nins; i++) {
        const struct ptx_ins *in = &k->ins[i];
        if (in->guard >= 0 && (uint32_t)in->guard == r)
            return true;
        for (unsigned j = 0; j < 6; j++) {
            const struct ptx_opnd *o = &in->o[j];
            if (in == at && j == 0)
                continue;
            if ((o->kind == OK_REG || (o->kind == OK_ADDR && o->has_base)) && o->reg[0] == r)
                return true;
            if (o->kind == OK_VEC)
                for (unsigned e = 0; e < o->nvec && e < 4; e++)
                    if (o->reg[e] == r)
                        return true;
        }
    }
    return false;
}

/* A global atomic is order-free when every order of the same updates
 * leaves the same bytes: an integer add, and, or, xor, min or max whose old
 * value nobody reads. A float add rounds differently in another order, and
 * an old value read (a ticket) depends on the order itself: such kernels
 * run their blocks in order, as one worker, so their bytes stay what they
 * were (a GPU's may differ from run to run). */
static bool order_free(const struct ptx_kernel *k, const struct ptx_ins *in)
{
    if ((in->op != OP_ATOM && in->op != OP_RED) || in->space == SP_SHARED ||
        in->space == SP_LOCAL)
        return true;
    if (in->ty == TY_F || (in->sub != SUB_A_ADD && in->sub != SUB_A_AND && in->sub != SUB_A_OR &&
                           in->sub != SUB_A_XOR && in->sub != SUB_A_MIN && in->sub != SUB_A_MAX))
        return false;
    return in->op == OP_RED || in->o[0].kind != OK_REG || !reg_mentioned(k, in, in->o[0].reg[0]);
}

void ptx_prepare(struct ptx_kernel *k)
{
    k->creg0 = k->nregs;
    k->nconst = 0;
    k->serial = false;
    /* printf's lines and cudaGraphSetConditional's last writer depend on
     * the order blocks run in. */
    for (size_t i = 0; i < k->ncalls; i++)
        k->serial = k->serial || k->calls[i].builtin == PTX_BI_VPRINTF ||
                    k->calls[i].builtin == PTX_BI_SETCOND;
    for (size_t i = 0; i < k->nins; i++)
        k->serial = k->serial || !order_free(k, &k->ins[i]);
    for (size_t i = 0; i < k->nins; i++) {
        prepare_consts(k, &k->ins[i]);
        k->ins[i].fast = pick_fast(&k->ins[i]);
    }
    k->nregs += k->nconst;
}

/* One statement for every lane of em; a full warp as a plain loop the
 * compiler can unroll or vectorise. */
/* The lanes' slots never overlap across lanes (a destination row equal to a
 * source row is the same lane's slot): no dependence between iterations,
 * so the compiler need not check for one before vectorising. */
#if defined(__clang__)
#define LANES_INDEPENDENT _Pragma("clang loop vectorize(enable)")
#elif defined(__GNUC__)
#define LANES_INDEPENDENT _Pragma("GCC ivdep")
#else
#define LANES_INDEPENDENT
#endif
#define EACH(stmt)                                                                 \
    do {                                                                           \
        if (em == ~0u) {                                                           \
            LANES_INDEPENDENT                                                      \
            for (unsigned l = 0; l < 32; l++) {                                    \
                stmt;                                                              \
            }                                                                      \
        } else {                                                                   \
            for (uint32_t mm_ = em; mm_; mm_ &= mm_ - 1) {                         \
                const unsigned l = (unsigned)__builtin_ctz(mm_);                   \
                stmt;                                                              \
            }                                                                      \
        }                                                                          \
    } while (0)

/* dst[l] = expr for every lane of em, where expr has no side effect and
 * may read any lane's registers: a warp with most of its lanes active
 * computes all 32 and keeps the old value in the others, which vectorises
 * where one lane at a time does not. */
#define EACHV(dst, expr)                                                           \
    do {                                                                           \
        if (em == ~0u) {                                                           \
            LANES_INDEPENDENT                                                      \
            for (unsigned l = 0; l < 32; l++)                                      \
                (dst)[l] = (expr);                                                 \
        } else if (__builtin_popcount(em) >= 12) {                                 \
            LANES_INDEPENDENT                                                      \
            for (unsigned l = 0; l < 32; l++) {                                    \
                const uint64_t v_ = (expr);                                        \
                (dst)[l] = (em >> l & 1) ? v_ : (dst)[l];                          \
            }                                                                      \
        } else {                                                                   \
            for (uint32_t mm_ = em; mm_; mm_ &= mm_ - 1) {                         \
                const unsigned l = (unsigned)__builtin_ctz(mm_);                   \
                (dst)[l] = (expr);                                                 \
            }                                                                      \
        }                                                                          \
    } while (0)

#define ROW(op_) (&w->r[(size_t)(op_).reg[0] * 32u])

/* f32 add, sub or mul (enum ptx_fast) of a full warp, four lanes at a time
 * (the NaN check, canonical NaNs, costs nothing then): registers are 64-bit
 * slots, an f32 in the low half, the high half zero. */
typedef float v4f __attribute__((vector_size(16)));
typedef uint32_t v4u __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
#if defined(__clang__)
#define SHUF(a_, b_, i0, i1, i2, i3) __builtin_shufflevector(a_, b_, i0, i1, i2, i3)
#else
#define SHUF(a_, b_, i0, i1, i2, i3) __builtin_shuffle(a_, b_, (v4u){i0, i1, i2, i3})
#endif

static inline void f32_warp(uint64_t *d, const uint64_t *x, const uint64_t *y, int fo)
{
    const v4u zero = {0, 0, 0, 0}, canon = {0x7fffffffu, 0x7fffffffu, 0x7fffffffu, 0x7fffffffu};
    for (unsigned l = 0; l < 32; l += 4) {
        v4u x0, x1, y0, y1;
        memcpy(&x0, x + l, 16);
        memcpy(&x1, x + l + 2, 16);
        memcpy(&y0, y + l, 16);
        memcpy(&y1, y + l + 2, 16);
        v4f a = (v4f)SHUF(x0, x1, 0, 2, 4, 6), c = (v4f)SHUF(y0, y1, 0, 2, 4, 6);
        v4f r = fo == F_F32_ADD ? a + c : fo == F_F32_SUB ? a - c : a * c;
        v4u nan = (v4u)(r != r);
        v4u u = ((v4u)r & ~nan) | (canon & nan);
        v4u lo = SHUF(u, zero, 0, 4, 1, 4), hi = SHUF(u, zero, 2, 4, 3, 4);
        memcpy(d + l, &lo, 16);
        memcpy(d + l + 2, &hi, 16);
    }
}
#undef SHUF

/* Runs a specialised instruction for the lanes of em; false: in->fast is
 * F_NONE. */
/* Inlined into run_warp's clones, so it is compiled for each target too. */
__attribute__((always_inline)) static inline bool run_fast(const struct blk *b, struct warp *w,
                                                           const struct ptx_ins *in,
                            uint32_t pc, uint32_t em)
{
    const struct ptx_opnd *o = in->o;
    const unsigned bits = in->bits;
    const uint64_t zm = bits >= 64 ? ~0ull : (1ull << bits) - 1;
    switch ((enum ptx_fast)in->fast) {
    case F_NONE:
        return false;
    case F_MOV_R: {
        const uint64_t *x = ROW(o[1]);
        uint64_t *d = ROW(o[0]);
        EACHV(d, x[l]);
        return true;
    }
    case F_MOV_I: {
        uint64_t *d = ROW(o[0]);
        const uint64_t y = o[1].imm & zm;
        EACHV(d, y);
        return true;
    }
#define BIN_RR(expr)                                                               \
    {                                                                              \
        const uint64_t *x = ROW(o[1]), *y = ROW(o[2]);                             \
        uint64_t *d = ROW(o[0]);                                                   \
        EACHV(d, (expr));                                                       \
        return true;                                                               \
    }
#define BIN_RI(expr)                                                               \
    {                                                                              \
        const uint64_t *x = ROW(o[1]);                                             \
        const uint64_t y = o[2].imm;                                               \
        uint64_t *d = ROW(o[0]);                                                   \
        EACHV(d, (expr));                                                       \
        return true;                                                               \
    }
    case F_IADD_RR: BIN_RR((x[l] + y[l]) & zm)
    case F_IADD_RI: BIN_RI((x[l] + y) & zm)
    case F_ISUB_RR: BIN_RR((x[l] - y[l]) & zm)
    case F_ISUB_RI: BIN_RI((x[l] - y) & zm)
    case F_IMUL_RR: BIN_RR((x[l] * y[l]) & zm)
    case F_IMUL_RI: BIN_RI((x[l] * y) & zm)
    case F_AND_RR: BIN_RR(x[l] & y[l])
    case F_AND_RI: BIN_RI(x[l] & y)
    case F_OR_RR: BIN_RR(x[l] | y[l])
    case F_OR_RI: BIN_RI(x[l] | y)
    case F_XOR_RR: BIN_RR((x[l] ^ y[l]) & zm)
    case F_XOR_RI: BIN_RI((x[l] ^ y) & zm)
    case F_SHL_RI: BIN_RI((x[l] << y) & zm)
    case F_SHR_RI: BIN_RI((x[l] & zm) >> y)
    case F_SAR_RI: BIN_RI((uint64_t)(sx(x[l], bits) >> y) & zm)
    /* mul.wide: the product of the sign- or zero-extended halves, 2x wide */
    case F_IMULW_RR: BIN_RR(zx((uint64_t)(sx(x[l], bits) * sx(y[l], bits)), 2 * bits))
    case F_IMULW_RI: BIN_RI(zx((uint64_t)(sx(x[l], bits) * sx(y, bits)), 2 * bits))
    case F_UMULW_RR: BIN_RR(zx(zx(x[l], bits) * zx(y[l], bits), 2 * bits))
    case F_UMULW_RI: BIN_RI(zx(zx(x[l], bits) * zx(y, bits), 2 * bits))
    case F_F32_ADD:
    case F_F32_SUB:
    case F_F32_MUL: {
        const uint64_t *x = ROW(o[1]), *y = ROW(o[2]);
        uint64_t *d = ROW(o[0]);
        const int fo = in->fast;
        if (em == ~0u) {
            f32_warp(d, x, y, fo);
            return true;
        }
        for (uint32_t mm = em; mm; mm &= mm - 1) {
            const unsigned l = (unsigned)__builtin_ctz(mm);
            const float a = as_f(x[l]), c = as_f(y[l]);
            d[l] = of_fc(fo == F_F32_ADD ? a + c : fo == F_F32_SUB ? a - c : a * c);
        }
        return true;
    }
    case F_F64_ADD: BIN_RR(of_d(as_d(x[l]) + as_d(y[l])))
    case F_F64_SUB: BIN_RR(of_d(as_d(x[l]) - as_d(y[l])))
    case F_F64_MUL: BIN_RR(of_d(as_d(x[l]) * as_d(y[l])))
#undef BIN_RR
#undef BIN_RI
    case F_SELP: {
        const uint64_t *x = ROW(o[1]), *y = ROW(o[2]), *p = ROW(o[3]);
        uint64_t *d = ROW(o[0]);
        EACHV(d, p[l] ? x[l] : y[l]);
        return true;
    }
    case F_IMAD_RRR: {
        const uint64_t *x = ROW(o[1]), *y = ROW(o[2]), *z = ROW(o[3]);
        uint64_t *d = ROW(o[0]);
        EACHV(d, (x[l] * y[l] + z[l]) & zm);
        return true;
    }
    case F_F32_FMA: {
        const uint64_t *x = ROW(o[1]), *y = ROW(o[2]), *z = ROW(o[3]);
        uint64_t *d = ROW(o[0]);
        EACHV(d, of_fc(fmaf(as_f(x[l]), as_f(y[l]), as_f(z[l]))));
        return true;
    }
    case F_F64_FMA: {
        const uint64_t *x = ROW(o[1]), *y = ROW(o[2]), *z = ROW(o[3]);
        uint64_t *d = ROW(o[0]);
        EACHV(d, of_d(fma(as_d(x[l]), as_d(y[l]), as_d(z[l]))));
        return true;
    }
    case F_GLOBAL_R: {
        const uint64_t *x = ROW(o[1]);
        uint64_t *d = ROW(o[0]);
        EACHV(d, x[l] & zm);
        return true;
    }
    case F_CVT_II: {
        const uint64_t *x = ROW(o[1]);
        uint64_t *d = ROW(o[0]);
        const unsigned sb = in->sbits, db = in->bits;
        const uint64_t dm = db >= 64 ? ~0ull : (1ull << db) - 1;
        if (in->ty == TY_S && (db <= sb || in->sty == TY_S)) {
            /* a signed destination: sign-extended from the narrower width */
            const unsigned sh = 64 - (db < sb ? db : sb);
            EACHV(d, (uint64_t)((int64_t)(x[l] << sh) >> sh));
        } else if (in->sty == TY_S) {
            EACHV(d, (uint64_t)sx(x[l], sb) & dm);
        } else {
            EACHV(d, zx(x[l], sb) & dm);
        }
        return true;
    }
    case F_SHFL: {
        /* a converged warp (a diverged one may wait for its other lanes:
         * run_warp's path); as warp_op computes it */
        if (w->div)
            return false;
        const uint64_t *x = ROW(o[1]), *bv = ROW(o[2]), *cv = ROW(o[3]);
        uint64_t outv[32];
        uint32_t okm = 0;
        const uint8_t sub = in->sub;
        for (uint32_t mm = em; mm; mm &= mm - 1) {
            const unsigned l = (unsigned)__builtin_ctz(mm);
            const uint32_t c = (uint32_t)cv[l], seg = (c >> 8) & 0x1f, clamp = c & 0x1f;
            const uint32_t minl = l & seg, maxl = minl | (clamp & ~seg), bb = (uint32_t)bv[l];
            int64_t j;
            bool ok;
            switch (sub) {
            case SUB_UP: j = (int64_t)l - bb; ok = j >= (int64_t)maxl; break;
            case SUB_DOWN: j = (int64_t)l + bb; ok = j <= (int64_t)maxl; break;
            case SUB_BFLY: j = (int64_t)(l ^ bb); ok = j <= (int64_t)maxl; break;
            default: j = minl | (bb & 0x1f & ~seg); ok = j <= (int64_t)maxl; break;
            }
            if (!ok)
                j = l;
            outv[l] = x[j] & 0xffffffffu;
            okm |= (uint32_t)ok << l;
        }
        if (o[0].kind == OK_REG) {
            uint64_t *d = ROW(o[0]);
            EACH(d[l] = outv[l]);
        }
        if (o[5].kind == OK_REG) {
            uint64_t *p = ROW(o[5]);
            EACH(p[l] = okm >> l & 1);
        }
        return true;
    }
    case F_CVT_FF: {
        const uint64_t *x = ROW(o[1]);
        uint64_t *d = ROW(o[0]);
        if (in->sbits == 32)
            EACHV(d, of_d((double)as_f(x[l])));
        else
            EACHV(d, of_f((float)as_d(x[l])));
        return true;
    }
    case F_CVT_FI: {
        const uint64_t *x = ROW(o[1]);
        uint64_t *d = ROW(o[0]);
        const unsigned sb = in->sbits;
        if (in->sty == TY_S && bits == 32)
            EACHV(d, of_f((float)sx(x[l], sb)));
        else if (in->sty == TY_S)
            EACHV(d, of_d((double)sx(x[l], sb)));
        else if (bits == 32)
            EACHV(d, of_f((float)zx(x[l], sb)));
        else
            EACHV(d, of_d((double)zx(x[l], sb)));
        return true;
    }
    case F_SETP_U:
    case F_SETP_S: {
        /* operands compared at the source width: zero- or sign-extended */
        const unsigned sb = in->sbits;
        const unsigned sh = sb >= 64 ? 0 : 64 - sb;
        const bool sg = in->fast == F_SETP_S;
        const uint64_t *x = ROW(o[1]);
        const uint64_t *yr = o[2].kind == OK_REG ? ROW(o[2]) : NULL;
        const uint64_t yi = o[2].imm;
        uint64_t *d = ROW(o[0]);
        uint64_t ya[32];
        const uint64_t *y = yr;
        if (!yr) {
            for (unsigned l = 0; l < 32; l++)
                ya[l] = yi;
            y = ya;
        }
#define CMPS(op_)                                                                  \
    do {                                                                           \
        if (sg)                                                                    \
            EACHV(d, ((int64_t)(x[l] << sh) >> sh) op_ ((int64_t)(y[l] << sh) >> sh)); \
        else                                                                       \
            EACHV(d, (x[l] << sh >> sh) op_ (y[l] << sh >> sh));                \
    } while (0)
        switch (in->cmp) {
        case CMP_EQ: CMPS(==); break;
        case CMP_NE: CMPS(!=); break;
        case CMP_LT: CMPS(<); break;
        case CMP_LE: CMPS(<=); break;
        case CMP_GT: CMPS(>); break;
        default: CMPS(>=); break;
        }
#undef CMPS
        return true;
    }
    case F_LDPARAM: {
        const uint64_t a = o[1].imm;
        const size_t es = bits / 8;
        if (a > b->l->argsize || es > b->l->argsize - a)
            fault(b, pc, "parameter access out of bounds");
        uint64_t v = 0;
        memcpy(&v, b->l->args + a, es);
        if (in->ty == TY_S)
            v = (uint64_t)sx(v, bits);
        uint64_t *d = ROW(o[0]);
        EACHV(d, v);
        return true;
    }
    case F_MOV_S: {
        uint64_t *d = ROW(o[0]);
        const struct ptx_launch *L = b->l;
        const unsigned id = (unsigned)o[1].imm;
        if (id == SR_TID_X && L->block[0] == b->nthreads) { /* a one-dimensional block */
            const uint64_t t0 = (uint64_t)w->id * 32u;
            EACHV(d, zx(t0 + l, bits));
        } else if (id == SR_LANEID) {
            EACHV(d, zx(l, bits));
        } else if (id == SR_NTID_X || id == SR_NTID_Y || id == SR_NTID_Z ||
                   id == SR_CTAID_X || id == SR_CTAID_Y || id == SR_CTAID_Z ||
                   id == SR_NCTAID_X || id == SR_NCTAID_Y || id == SR_NCTAID_Z) {
            const uint64_t v = zx(sreg(b, w, id, 0), bits); /* the same for the block */
            EACHV(d, v);
        } else {
            EACHV(d, zx(sreg(b, w, id, (int)l), bits));
        }
        return true;
    }
    case F_LDG: {
        const uint64_t *ab = ROW(o[1]);
        uint64_t *d = ROW(o[0]);
        const uint64_t off = o[1].imm;
        const bool sg = in->ty == TY_S;
        const unsigned es = bits / 8;
        if (em == ~0u && !sg && (es == 4 || es == 8) && ab != d) {
            /* a full warp's words: the null-page check of every lane in
             * one pass, then the loads, which the compiler may gather */
            uint64_t low = 0;
            EACH(low |= ab[l] + off < 4096);
            if (!low) {
                if (es == 4)
                    EACH({
                        uint32_t t;
                        memcpy(&t, (const void *)(uintptr_t)(ab[l] + off), 4);
                        d[l] = t;
                    });
                else
                    EACH(memcpy(&d[l], (const void *)(uintptr_t)(ab[l] + off), 8));
                return true;
            }
        }
        for (uint32_t mm = em; mm; mm &= mm - 1) {
            const unsigned l = (unsigned)__builtin_ctz(mm);
            const uint64_t ad = ab[l] + off;
            global_check(b, pc, ad);
            const void *p = (const void *)(uintptr_t)ad;
            uint64_t v;
            switch (es) {
            case 1: v = *(const uint8_t *)p; break;
            case 2: { uint16_t t; memcpy(&t, p, 2); v = t; break; }
            case 4: { uint32_t t; memcpy(&t, p, 4); v = t; break; }
            default: memcpy(&v, p, 8); break;
            }
            d[l] = sg ? (uint64_t)sx(v, bits) : v;
        }
        return true;
    }
    case F_LDS: {
        /* shared memory: the block's bytes, each lane's range checked */
        const uint64_t *ab = ROW(o[1]);
        uint64_t *d = ROW(o[0]);
        const uint64_t off = o[1].imm, lim = b->shsize;
        const bool sg = in->ty == TY_S;
        const unsigned es = bits / 8;
        for (uint32_t mm = em; mm; mm &= mm - 1) {
            const unsigned l = (unsigned)__builtin_ctz(mm);
            const uint64_t a = ab[l] + off;
            if (a > lim || es > lim - a)
                fault(b, pc, "shared memory access out of bounds");
            const unsigned char *p = b->shared + a;
            uint64_t v;
            switch (es) {
            case 1: v = *p; break;
            case 2: { uint16_t t; memcpy(&t, p, 2); v = t; break; }
            case 4: { uint32_t t; memcpy(&t, p, 4); v = t; break; }
            default: memcpy(&v, p, 8); break;
            }
            d[l] = sg ? (uint64_t)sx(v, bits) : v;
        }
        return true;
    }
    case F_STS: {
        const uint64_t *ab = ROW(o[0]);
        const uint64_t *v = ROW(o[1]);
        const uint64_t off = o[0].imm, lim = b->shsize;
        const unsigned es = bits / 8;
        for (uint32_t mm = em; mm; mm &= mm - 1) {
            const unsigned l = (unsigned)__builtin_ctz(mm);
            const uint64_t a = ab[l] + off;
            if (a > lim || es > lim - a)
                fault(b, pc, "shared memory access out of bounds");
            unsigned char *p = b->shared + a;
            switch (es) {
            case 1: *p = (uint8_t)v[l]; break;
            case 2: { uint16_t t = (uint16_t)v[l]; memcpy(p, &t, 2); break; }
            case 4: { uint32_t t = (uint32_t)v[l]; memcpy(p, &t, 4); break; }
            default: memcpy(p, &v[l], 8); break;
            }
        }
        return true;
    }
    case F_STG: {
        const uint64_t *ab = ROW(o[0]);
        const uint64_t *v = ROW(o[1]);
        const uint64_t off = o[0].imm;
        const unsigned es = bits / 8;
        if (em == ~0u && (es == 4 || es == 8)) {
            /* the null-page check of every lane in one pass first */
            uint64_t low = 0;
            EACH(low |= ab[l] + off < 4096);
            if (!low) {
                if (es == 4)
                    for (unsigned l = 0; l < 32; l++) {
                        uint32_t t = (uint32_t)v[l];
                        memcpy((void *)(uintptr_t)(ab[l] + off), &t, 4);
                    }
                else
                    for (unsigned l = 0; l < 32; l++)
                        memcpy((void *)(uintptr_t)(ab[l] + off), &v[l], 8);
                return true;
            }
        }
        for (uint32_t mm = em; mm; mm &= mm - 1) {
            const unsigned l = (unsigned)__builtin_ctz(mm);
            const uint64_t ad = ab[l] + off;
            global_check(b, pc, ad);
            void *p = (void *)(uintptr_t)ad;
            switch (es) {
            case 1: *(uint8_t *)p = (uint8_t)v[l]; break;
            case 2: { uint16_t t = (uint16_t)v[l]; memcpy(p, &t, 2); break; }
            case 4: { uint32_t t = (uint32_t)v[l]; memcpy(p, &t, 4); break; }
            default: memcpy(p, &v[l], 8); break;
            }
        }
        return true;
    }
    }
    return false;
}
#undef ROW
#undef EACH
#undef EACHV

enum { W_DONE, W_BAR };

/* The warp's lanes at one program counter run as a group: while the group's
 * pc stays below `bound` (the smallest pc of the warp's other live lanes,
 * UINT32_MAX while converged) it is still the group the smallest-pc rule
 * picks, so it runs on without looking at the other lanes; the group's
 * lanes' lpc[] is written only when it leaves (reaching `bound` merges it
 * with the lanes waiting there). */
#define LEAVE(p_)                                                                  \
    do {                                                                           \
        if (w->div)                                                                \
            for (uint32_t mm = mask; mm; mm &= mm - 1)                             \
                w->lpc[__builtin_ctz(mm)] = (p_);                                  \
        else                                                                       \
            w->pc = (p_);                                                          \
    } while (0)
#define GOTO(p_)                                                                   \
    do {                                                                           \
        pc = (p_);                                                                 \
        if (pc >= bound) {                                                         \
            LEAVE(pc);                                                             \
            goto regroup;                                                          \
        }                                                                          \
        goto top;                                                                  \
    } while (0)

/* The interpreter's loop compiled three times on x86-64: for the baseline,
 * x86-64-v3 (AVX2, FMA) and x86-64-v4 (AVX-512), picked once by the loader
 * (an ifunc); the per-lane loops then run 4 or 8 lanes an instruction, the
 * stores may scatter, and fmaf() is one instruction instead of a call. All
 * compute the same bits: IEEE operations round the same, -ffp-contract=off
 * keeps the compiler from fusing. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define PTX_SANITIZED 1 /* an ifunc resolves before the sanitizer's runtime */
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PTX_SANITIZED 1
#endif
#if defined(__x86_64__) && defined(__ELF__) && defined(__GNUC__) && !defined(PTX_SANITIZED)
#define RUN_WARP_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define RUN_WARP_CLONES
#endif

RUN_WARP_CLONES static int run_warp(struct blk *b, struct warp *w)
{
    const struct ptx_kernel *k = b->k;
    const struct ptx_ins *ins = k->ins;
    const uint32_t nins = (uint32_t)k->nins;
    uint32_t mask, pc, bound, cnt;
regroup:
    if (!w->div) {
        mask = w->live;
        pc = w->pc;
        bound = UINT32_MAX;
    } else {
        pc = bound = UINT32_MAX;
        mask = 0;
        for (uint32_t mm = w->live & ~w->parked; mm; mm &= mm - 1) {
            int l = __builtin_ctz(mm);
            uint32_t p = w->lpc[l];
            if (p < pc) {
                bound = pc;
                pc = p;
                mask = 1u << l;
            } else if (p == pc) {
                mask |= 1u << l;
            } else if (p < bound) {
                bound = p;
            }
        }
        if (!mask && w->parked) {
            /* nothing else can run: the lanes waited for have exited */
            sync_release(b, w);
            goto regroup;
        }
        if (mask == w->live) {
            w->div = false;
            bound = UINT32_MAX;
        }
    }
    if (!mask)
        return W_DONE;
    cnt = (uint32_t)__builtin_popcount(mask);
top:
    for (;;) {
        if (pc >= nins) {
            w->live &= ~mask; /* falling off the end is a return */
            if (!w->live)
                return W_DONE;
            goto regroup;
        }
        const struct ptx_ins *in = &ins[pc];
        uint32_t em = mask;
        if (in->guard >= 0) {
            uint32_t gm = 0;
            const uint64_t *g = &w->r[(size_t)in->guard * 32u];
            const uint32_t neg = in->guard_neg;
            if (mask == ~0u) {
                for (unsigned l = 0; l < 32; l++)
                    gm |= (uint32_t)((g[l] != 0) ^ neg) << l;
            } else {
                for (uint32_t mm = mask; mm; mm &= mm - 1) {
                    int l = __builtin_ctz(mm);
                    gm |= (uint32_t)((g[l] != 0) ^ neg) << l;
                }
            }
            em = gm;
        }
        b->icount += cnt;
        uint32_t next = pc + 1;
        const struct ptx_opnd *o = in->o;
        if (in->fast && em && run_fast(b, w, in, pc, em))
            goto seq;
        switch (in->op) {
        case OP_BRA: {
            uint32_t t = (uint32_t)o[0].imm;
            if (em == mask)
                GOTO(t);
            if (em == 0)
                break;
            w->div = true;
            for (uint32_t mm = mask; mm; mm &= mm - 1) {
                int l = __builtin_ctz(mm);
                w->lpc[l] = (em >> l & 1) ? t : next;
            }
            goto regroup;
        }
        case OP_CALL: {
            const struct ptx_call *c = &k->calls[o[0].imm];
            if (c->builtin == PTX_BI_VPRINTF) {
                LANES {
                    LANE;
                    unsigned char *loc =
                        b->local + (size_t)(w->id * 32u + (unsigned)l) * k->local_bytes;
                    int32_t ret = device_printf(b, pc, loc + c->src[0], loc + c->src[1]);
                    if (c->ret_size)
                        memcpy(loc + c->ret_to, &ret, sizeof ret);
                }
                break;
            }
            if (c->builtin == PTX_BI_SETCOND) {
                /* lanes in order: the last one's value stays (racing calls
                 * are undefined behaviour, cuda_device_runtime_api.h) */
                LANES {
                    LANE;
                    const unsigned char *loc =
                        b->local + (size_t)(w->id * 32u + (unsigned)l) * k->local_bytes;
                    uint64_t h;
                    uint32_t v;
                    memcpy(&h, loc + c->src[0], sizeof h);
                    memcpy(&v, loc + c->src[1], sizeof v);
                    if (!b->l->set_cond || b->l->set_cond(h, v) != 0)
                        fault(b, pc, "cudaGraphSetConditional: not a conditional handle");
                }
                break;
            }
            LANES {
                LANE;
                unsigned char *loc = b->local + (size_t)(w->id * 32u + (unsigned)l) * k->local_bytes;
                if (w->depth[l] == PTX_CALL_DEPTH)
                    fault(b, pc, "calls nested too deep");
                for (unsigned f = 0; f < w->depth[l]; f++)
                    if (k->calls[w->frame[l][f]].target == c->target)
                        fault(b, pc, "a recursive call (not supported)");
                for (uint32_t a = 0; a < c->nargs; a++)
                    memmove(loc + c->dst[a], loc + c->src[a], c->size[a]);
                w->frame[l][w->depth[l]] = (uint32_t)o[0].imm;
                w->ret_pc[l][w->depth[l]++] = next;
            }
            if (em == mask)
                GOTO(c->target);
            if (em == 0)
                break;
            w->div = true;
            for (uint32_t mm = mask; mm; mm &= mm - 1) {
                int l = __builtin_ctz(mm);
                w->lpc[l] = (em >> l & 1) ? c->target : next;
            }
            goto regroup;
        }
        case OP_RET: {
            uint32_t exiting = 0, back = 0, to = UINT32_MAX;
            bool same = true;
            uint32_t dest[32];
            LANES {
                LANE;
                if (!w->depth[l]) {
                    exiting |= 1u << l;
                    continue;
                }
                unsigned f = --w->depth[l];
                const struct ptx_call *c = &k->calls[w->frame[l][f]];
                unsigned char *loc = b->local + (size_t)(w->id * 32u + (unsigned)l) * k->local_bytes;
                if (c->ret_size)
                    memmove(loc + c->ret_to, loc + c->ret_from, c->ret_size);
                dest[l] = w->ret_pc[l][f];
                same = same && (to == UINT32_MAX || to == dest[l]);
                to = dest[l];
                back |= 1u << l;
            }
            w->live &= ~exiting;
            if (!w->live)
                return W_DONE;
            if (exiting) {
                mask &= ~exiting;
                if (!mask)
                    goto regroup; /* the others' lpc[] is current */
                cnt = (uint32_t)__builtin_popcount(mask);
            }
            if (!back)
                break;
            if (back == mask && same)
                GOTO(to);
            w->div = true;
            for (uint32_t mm = mask; mm; mm &= mm - 1) {
                int l = __builtin_ctz(mm);
                w->lpc[l] = (back >> l & 1) ? dest[l] : next;
            }
            goto regroup;
        }
        case OP_BAR:
            if (em != mask || mask != w->live)
                fault(b, pc, "a barrier reached by part of a warp");
            if (in->space2 == 3) {
                uint32_t ballot = 0;
                LANES {
                    LANE;
                    ballot |= (uint32_t)((V(b, w, &o[2], l) != 0) ^ o[2].neg) << l;
                }
                b->red_count += (uint32_t)__builtin_popcount(ballot);
                b->red_and = b->red_and && ballot == em;
                b->red_or = b->red_or || ballot != 0;
                w->red = in;
            }
            LEAVE(next);
            return W_BAR;
        case OP_TRAP:
            if (em)
                fault(b, pc, "trap");
            break;
        case OP_NOP:
            break;
        case OP_MOV:
            if (o[0].kind == OK_VEC) { /* unpack */
                unsigned part = in->bits / o[0].nvec;
                LANES {
                    LANE;
                    uint64_t v = V(b, w, &o[1], l);
                    for (unsigned i = 0; i < o[0].nvec; i++)
                        if (o[0].reg[i] != UINT32_MAX)
                            R(o[0].reg[i], l) = zx(v >> (i * part), part);
                }
            } else if (o[1].kind == OK_VEC) { /* pack */
                unsigned part = in->bits / o[1].nvec;
                LANES {
                    LANE;
                    uint64_t v = 0;
                    for (unsigned i = 0; i < o[1].nvec; i++)
                        v |= zx(R(o[1].reg[i], l), part) << (i * part);
                    R(o[0].reg[0], l) = v;
                }
            } else if (o[1].kind == OK_REG) {
                const uint64_t *s = &w->r[(size_t)o[1].reg[0] * 32u];
                uint64_t *d = &w->r[(size_t)o[0].reg[0] * 32u];
                LANES {
                    LANE;
                    d[l] = s[l];
                }
            } else {
                unsigned bits = in->bits;
                LANES {
                    LANE;
                    R(o[0].reg[0], l) = zx(V(b, w, &o[1], l), bits);
                }
            }
            break;
        case OP_LD: {
            const unsigned es = in->bits / 8, nv = in->vec ? in->vec : 1;
            const struct ptx_opnd *a = &o[1];
            if (nv == 1 && a->has_base && in->ty != TY_S && o[0].kind == OK_REG &&
                (in->space == SP_GLOBAL || in->space == SP_GENERIC) && (es == 4 || es == 8)) {
                /* the common case: a global word through a register */
                const uint64_t *ab = &w->r[(size_t)a->reg[0] * 32u];
                uint64_t *d = &w->r[(size_t)o[0].reg[0] * 32u];
                const uint64_t off = a->imm;
                LANES {
                    LANE;
                    uint64_t ad = ab[l] + off;
                    global_check(b, pc, ad);
                    if (es == 4) {
                        uint32_t v;
                        memcpy(&v, (const void *)(uintptr_t)ad, 4);
                        d[l] = v;
                    } else {
                        memcpy(&d[l], (const void *)(uintptr_t)ad, 8);
                    }
                }
                break;
            }
            LANES {
                LANE;
                uint64_t ad = a->imm + (a->has_base ? R(a->reg[0], l) : 0);
                const unsigned char *p = addr(b, w, pc, in->space, ad, es * nv, l);
                for (unsigned i = 0; i < nv; i++) {
                    uint64_t v = 0;
                    memcpy(&v, p + i * es, es);
                    if (in->ty == TY_S)
                        v = (uint64_t)sx(v, in->bits);
                    uint32_t dr = o[0].kind == OK_VEC ? o[0].reg[i] : o[0].reg[0];
                    if (dr != UINT32_MAX)
                        R(dr, l) = v;
                }
            }
            break;
        }
        case OP_ST: {
            const unsigned es = in->bits / 8, nv = in->vec ? in->vec : 1;
            const struct ptx_opnd *a = &o[0];
            if (nv == 1 && a->has_base && o[1].kind == OK_REG &&
                (in->space == SP_GLOBAL || in->space == SP_GENERIC) && (es == 4 || es == 8)) {
                const uint64_t *ab = &w->r[(size_t)a->reg[0] * 32u];
                const uint64_t *v = &w->r[(size_t)o[1].reg[0] * 32u];
                const uint64_t off = a->imm;
                LANES {
                    LANE;
                    uint64_t ad = ab[l] + off;
                    global_check(b, pc, ad);
                    if (es == 4) {
                        uint32_t x = (uint32_t)v[l];
                        memcpy((void *)(uintptr_t)ad, &x, 4);
                    } else {
                        memcpy((void *)(uintptr_t)ad, &v[l], 8);
                    }
                }
                break;
            }
            LANES {
                LANE;
                uint64_t ad = a->imm + (a->has_base ? R(a->reg[0], l) : 0);
                unsigned char *p = addr(b, w, pc, in->space, ad, es * nv, l);
                for (unsigned i = 0; i < nv; i++) {
                    uint64_t v;
                    if (o[1].kind == OK_VEC)
                        v = o[1].reg[i] == UINT32_MAX ? 0 : R(o[1].reg[i], l);
                    else
                        v = V(b, w, &o[1], l);
                    memcpy(p + i * es, &v, es);
                }
            }
            break;
        }
        case OP_CVTA:
        case OP_CVTA_TO: {
            bool to = in->op == OP_CVTA_TO;
            LANES {
                LANE;
                uint64_t v = V(b, w, &o[1], l), base = 0;
                switch (in->space) {
                case SP_SHARED: base = (uintptr_t)b->shared; break;
                case SP_LOCAL:
                    base = (uintptr_t)(b->local + (size_t)(w->id * 32u + (unsigned)l) *
                                                      k->local_bytes);
                    break;
                case SP_PARAM: base = (uintptr_t)b->l->args; break;
                default: break;
                }
                R(o[0].reg[0], l) = zx(to ? v - base : v + base, in->bits);
            }
            break;
        }
        case OP_SETP: {
            bool fl = in->sty == TY_F, sg = in->sty == TY_S;
            unsigned sb = in->sbits;
            if (!fl && !sg && in->sub == SUB_NONE && o[0].kind == OK_REG &&
                o[5].kind == OK_NONE && o[1].kind == OK_REG &&
                (in->cmp == CMP_LT || in->cmp == CMP_GE)) {
                /* loop bounds: unsigned < and >= */
                const uint64_t *x = &w->r[(size_t)o[1].reg[0] * 32u];
                uint64_t *d = &w->r[(size_t)o[0].reg[0] * 32u];
                const bool ge = in->cmp == CMP_GE;
                LANES {
                    LANE;
                    uint64_t y = zx(V(b, w, &o[2], l), sb);
                    d[l] = (zx(x[l], sb) < y) != ge;
                }
                break;
            }
            LANES {
                LANE;
                uint64_t x = V(b, w, &o[1], l), y = V(b, w, &o[2], l);
                bool r;
                if (fl)
                    r = sb == 32 ? fcmp(in->cmp, as_f(x), as_f(y)) : fcmp(in->cmp, as_d(x), as_d(y));
                else
                    r = icmp(in->cmp, sg, x, y, sb);
                bool q = !r;
                if (in->sub != SUB_NONE) {
                    bool c = (V(b, w, &o[3], l) != 0) ^ o[3].neg;
                    if (in->sub == SUB_BAND) {
                        r = r && c;
                        q = q && c;
                    } else if (in->sub == SUB_BOR) {
                        r = r || c;
                        q = q || c;
                    } else {
                        r = r != c;
                        q = q != c;
                    }
                }
                if (o[0].kind == OK_REG)
                    R(o[0].reg[0], l) = r;
                if (o[5].kind == OK_REG)
                    R(o[5].reg[0], l) = q;
            }
            break;
        }
        case OP_ADD:
        case OP_SUB:
            if (in->ty != TY_F && !in->sat && !in->cc && o[1].kind == OK_REG) {
                /* the common case, kept tight */
                const uint64_t *x = &w->r[(size_t)o[1].reg[0] * 32u];
                uint64_t *d = &w->r[(size_t)o[0].reg[0] * 32u];
                const unsigned bits = in->bits;
                const bool sub = in->op == OP_SUB;
                if (o[2].kind == OK_REG) {
                    const uint64_t *y = &w->r[(size_t)o[2].reg[0] * 32u];
                    LANES {
                        LANE;
                        d[l] = zx(sub ? x[l] - y[l] : x[l] + y[l], bits);
                    }
                } else {
                    uint64_t y = V(b, w, &o[2], 0);
                    LANES {
                        LANE;
                        d[l] = zx(sub ? x[l] - y : x[l] + y, bits);
                    }
                }
                break;
            }
            /* fall through */
        case OP_MUL:
            if (in->op == OP_MUL && in->ty == TY_F && in->bits == 32 &&
                (in->rnd == RND_NONE || in->rnd == RND_RN) &&
                !in->ftz && !in->sat && o[1].kind == OK_REG && o[2].kind == OK_REG) {
                const uint64_t *x = &w->r[(size_t)o[1].reg[0] * 32u];
                const uint64_t *y = &w->r[(size_t)o[2].reg[0] * 32u];
                uint64_t *d = &w->r[(size_t)o[0].reg[0] * 32u];
                LANES {
                    LANE;
                    d[l] = of_fc(as_f(x[l]) * as_f(y[l]));
                }
                break;
            }
            /* fall through */
        default: {
            if (in->ty == TY_F && in->bits == 32 && (in->op == OP_ADD || in->op == OP_SUB) &&
                (in->rnd == RND_NONE || in->rnd == RND_RN) && !in->ftz && !in->sat &&
                o[1].kind == OK_REG && o[2].kind == OK_REG) {
                const uint64_t *x = &w->r[(size_t)o[1].reg[0] * 32u];
                const uint64_t *y = &w->r[(size_t)o[2].reg[0] * 32u];
                uint64_t *d = &w->r[(size_t)o[0].reg[0] * 32u];
                const bool sub = in->op == OP_SUB;
                LANES {
                    LANE;
                    d[l] = of_fc(sub ? as_f(x[l]) - as_f(y[l]) : as_f(x[l]) + as_f(y[l]));
                }
                break;
            }
            if (in->cc) {
                /* carry chains: .cc writes CC.CF, addc/subc/madc read it */
                const unsigned bits = in->bits;
                LANES {
                    LANE;
                    u128 x = zx(V(b, w, &o[1], l), bits), y = zx(V(b, w, &o[2], l), bits);
                    u128 cin = (in->cc & 2) ? w->cf[l] : 0, r;
                    bool carry;
                    if (in->op == OP_SUB) {
                        r = x - y - cin;
                        carry = x < y + cin; /* a borrow */
                    } else {
                        u128 t = x;
                        if (in->op == OP_MAD) {
                            u128 p = x * y;
                            if (in->sub == SUB_HI && in->ty == TY_S) /* the signed product */
                                p = (u128)((i128)sx((uint64_t)x, bits) * sx((uint64_t)y, bits));
                            t = in->sub == SUB_HI ? zx((uint64_t)(p >> bits), bits)
                                                  : zx((uint64_t)p, bits);
                            y = zx(V(b, w, &o[3], l), bits);
                        }
                        r = t + y + cin;
                        carry = (r >> bits) != 0;
                    }
                    if (in->cc & 1)
                        w->cf[l] = carry;
                    R(o[0].reg[0], l) = zx((uint64_t)r, bits);
                }
                break;
            }
            uint64_t tmp[32];
            LANES {
                LANE;
                tmp[l] = alu(b, w, in, l);
            }
            LANES {
                LANE;
                R(o[0].reg[0], l) = tmp[l];
            }
            break;
        }
        case OP_ATOM:
        case OP_RED: {
            bool red = in->op == OP_RED;
            const struct ptx_opnd *a = &o[red ? 0 : 1];
            LANES {
                LANE;
                uint64_t ad = a->imm + (a->has_base ? R(a->reg[0], l) : 0);
                unsigned char *p = addr(b, w, pc, in->space, ad, in->bits / 8, l);
                uint64_t x = V(b, w, &o[red ? 1 : 2], l);
                uint64_t y = in->sub == SUB_A_CAS ? V(b, w, &o[3], l) : 0;
                uint64_t old = atomic_rmw(b, pc, in, p, zx(x, in->bits), zx(y, in->bits));
                if (!red && o[0].kind == OK_REG)
                    R(o[0].reg[0], l) = zx(old, in->bits);
            }
            break;
        }
        case OP_SHFL:
        case OP_VOTE:
        case OP_MATCH:
        case OP_REDUX:
        case OP_WSYNC: {
            if (in->wsync && w->div && em) {
                uint32_t want = (uint32_t)V(b, w, &o[in->wsync - 1], __builtin_ctz(em));
                if (want & w->live & ~mask) {
                    /* lanes of another branch are in the membermask: this
                     * group waits here (parked) while the others run, as
                     * on sm_70+, until every lane it waits for is parked
                     * at a .sync warp operation too */
                    w->parked |= mask;
                    w->need |= want;
                    for (uint32_t mm = mask; mm; mm &= mm - 1)
                        w->lpc[__builtin_ctz(mm)] = pc;
                    if (!(w->need & w->live & ~w->parked))
                        sync_release(b, w);
                    goto regroup;
                }
            }
            if (em) {
                const struct ptx_ins *li[32];
                LANES {
                    LANE;
                    li[l] = in;
                }
                warp_op(b, w, li, em);
            }
            break;
        }
        case OP_ACTIVEMASK:
            LANES {
                LANE;
                R(o[0].reg[0], l) = em;
            }
            break;
        }
    seq:
        pc = next;
        if (pc >= bound) {
            LEAVE(pc);
            goto regroup;
        }
    }
}
#undef GOTO
#undef LEAVE

static _Atomic uint64_t g_launches, g_thread_ins;
static _Atomic unsigned g_threads; /* ptx_set_threads(); 0: the cores */

void ptx_totals(uint64_t *launches, uint64_t *thread_instructions)
{
    *launches = atomic_load_explicit(&g_launches, memory_order_relaxed);
    *thread_instructions = atomic_load_explicit(&g_thread_ins, memory_order_relaxed);
}

void ptx_set_threads(unsigned n)
{
    atomic_store_explicit(&g_threads, n > PTX_MAX_THREADS ? PTX_MAX_THREADS : n,
                          memory_order_relaxed);
}

unsigned ptx_workers(const struct ptx_kernel *k, const struct ptx_launch *l, unsigned threads)
{
    if (!threads) {
        /* asked once: glibc reads a file under /sys for it */
        static _Atomic unsigned cores;
        threads = atomic_load_explicit(&cores, memory_order_relaxed);
        if (!threads) {
            long n = sysconf(_SC_NPROCESSORS_ONLN);
            threads = n < 1 ? 1 : n > PTX_MAX_THREADS ? PTX_MAX_THREADS : (unsigned)n;
            atomic_store_explicit(&cores, threads, memory_order_relaxed);
        }
    }
    uint64_t blocks = (uint64_t)l->grid[0] * l->grid[1] * l->grid[2];
    uint64_t work = blocks * l->block[0] * l->block[1] * l->block[2];
    /* Device printf's lines and order-dependent atomics (ptx_prepare) as
     * one worker runs them; a small grid costs less than the threads
     * would. */
    if (threads <= 1 || blocks < 2 || work < PTX_THREADS_MIN_WORK || k->serial)
        return 1;
    return blocks < threads ? (unsigned)blocks : threads;
}

/* One worker: its own registers, shared and local memory, running the
 * blocks it takes from the launch's counter (in order when it is alone). */
struct worker {
    const struct ptx_kernel *k;
    const struct ptx_launch *l;
    _Atomic uint64_t *next;
    uint64_t icount;
    bool must; /* the launch's own thread: out of memory is fatal */
};

static void *run_blocks(void *arg)
{
    struct worker *wk = arg;
    const struct ptx_kernel *k = wk->k;
    const struct ptx_launch *l = wk->l;
    struct blk b;
    memset(&b, 0, sizeof b);
    b.k = k;
    b.l = l;
    b.nthreads = l->block[0] * l->block[1] * l->block[2];
    unsigned nwarps = (b.nthreads + 31) / 32;
    b.shsize = k->shared_dyn_off + l->shmem;
    size_t regbytes = (size_t)(k->nregs ? k->nregs : 1) * 32u * sizeof(uint64_t);
    unsigned char *mem = sim_calloc(1, (size_t)nwarps * regbytes + b.shsize + 16 +
                                           (size_t)nwarps * 32u * k->local_bytes + 16);
    struct warp *ws = sim_calloc(nwarps, sizeof *ws);
    if (!mem || !ws) {
        sim_free(mem);
        sim_free(ws);
        if (!wk->must)
            return NULL; /* the other workers take its blocks */
        fprintf(stderr, "simcuda: fatal: out of memory running kernel %s\n", k->name);
        abort();
    }
    b.shared = mem + (size_t)nwarps * regbytes;
    b.local = b.shared + ((b.shsize + 15) / 16 * 16);
    for (unsigned i = 0; i < nwarps; i++) {
        ws[i].r = (uint64_t *)(void *)(mem + (size_t)i * regbytes);
        ws[i].id = i;
        for (uint32_t c = 0; c < k->nconst; c++)
            for (unsigned ln = 0; ln < 32; ln++)
                ws[i].r[(size_t)(k->creg0 + c) * 32u + ln] = k->cval[c];
    }
    const uint64_t gx = l->grid[0], gxy = gx * l->grid[1];
    const uint64_t nblocks = gxy * l->grid[2];
    for (;;) {
        uint64_t idx = atomic_fetch_add_explicit(wk->next, 1, memory_order_relaxed);
        if (idx >= nblocks)
            break;
        b.ctaid[0] = (unsigned)(idx % gx);
        b.ctaid[1] = (unsigned)(idx % gxy / gx);
        b.ctaid[2] = (unsigned)(idx / gxy);
        b.red_count = 0;
        b.red_and = true;
        b.red_or = false;
        for (unsigned i = 0; i < nwarps; i++) {
            ws[i].red = NULL;
            memset(ws[i].depth, 0, sizeof ws[i].depth);
            unsigned n = b.nthreads - i * 32u;
            ws[i].live = n >= 32 ? ~0u : (1u << n) - 1;
            ws[i].pc = 0;
            ws[i].div = ws[i].done = ws[i].at_bar = false;
            ws[i].parked = ws[i].need = 0;
        }
        for (;;) {
            bool any_bar = false, any_live = false;
            for (unsigned i = 0; i < nwarps; i++) {
                if (ws[i].done)
                    continue;
                if (run_warp(&b, &ws[i]) == W_DONE)
                    ws[i].done = true;
                else
                    any_bar = true;
                any_live = any_live || !ws[i].done;
            }
            if (!any_live || !any_bar)
                break;
            /* the barrier releases: bar.red results to their warps */
            for (unsigned i = 0; i < nwarps; i++) {
                struct warp *w = &ws[i];
                if (!w->red)
                    continue;
                uint64_t v = w->red->sub == SUB_A_ADD ? b.red_count
                             : w->red->sub == SUB_A_AND ? b.red_and : b.red_or;
                for (uint32_t mm = w->live; mm; mm &= mm - 1)
                    R(w->red->o[0].reg[0], __builtin_ctz(mm)) = v;
                w->red = NULL;
            }
            b.red_count = 0;
            b.red_and = true;
            b.red_or = false;
        }
    }
    sim_free(ws);
    sim_free(mem);
    wk->icount = b.icount;
    return NULL;
}

uint64_t ptx_run(const struct ptx_kernel *k, const struct ptx_launch *l)
{
    _Atomic uint64_t next = 0;
    unsigned n = ptx_workers(k, l, atomic_load_explicit(&g_threads, memory_order_relaxed));
    struct worker wk[PTX_MAX_THREADS];
    pthread_t th[PTX_MAX_THREADS];
    bool started[PTX_MAX_THREADS] = {false};
    for (unsigned i = 0; i < n; i++)
        wk[i] = (struct worker){k, l, &next, 0, i == 0};
    /* Blocks are independent: the others run on threads of their own (one
     * that cannot start leaves its blocks to the rest). */
    for (unsigned i = 1; i < n; i++)
        started[i] = pthread_create(&th[i], NULL, run_blocks, &wk[i]) == 0;
    run_blocks(&wk[0]);
    uint64_t icount = wk[0].icount;
    for (unsigned i = 1; i < n; i++)
        if (started[i]) {
            pthread_join(th[i], NULL);
            icount += wk[i].icount;
        }
    atomic_fetch_add_explicit(&g_launches, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&g_thread_ins, icount, memory_order_relaxed);
    return icount;
}
