/*
 * The decoded PTX form ptx_parse.c produces and ptx_exec.c runs (private to
 * those two files). Every register of a kernel is a 64-bit slot per lane
 * (predicates included, 0 or 1); a value narrower than 64 bits is kept
 * zero-extended to 64 bits, and an instruction reads only the bits its type
 * names. Symbols are resolved to constants when decoded: a parameter to its
 * offset in the argument buffer, a shared variable to its offset in the
 * block's shared memory, a local variable to its offset in the thread's
 * local memory, a module-scope global or const variable to its host address.
 */
#ifndef SIM_PTX_INT_H
#define SIM_PTX_INT_H

#include "ptx.h"

#include <stdatomic.h>
#include <stdbool.h>

enum ptx_op {
    OP_MOV = 1, OP_LD, OP_ST, OP_CVTA, OP_CVTA_TO, OP_CVT,
    OP_ADD, OP_SUB, OP_MUL, OP_MAD, OP_FMA, OP_DIV, OP_REM, OP_ABS, OP_NEG,
    OP_MIN, OP_MAX, OP_AND, OP_OR, OP_XOR, OP_NOT, OP_CNOT, OP_SHL, OP_SHR,
    OP_POPC, OP_CLZ, OP_BREV, OP_BFE, OP_BFI, OP_LOP3, OP_PRMT,
    OP_SETP, OP_SELP, OP_BRA, OP_RET, OP_BAR, OP_NOP,
    OP_ATOM, OP_RED, OP_SHFL, OP_VOTE, OP_ACTIVEMASK, OP_MATCH,
    OP_SQRT, OP_RSQRT, OP_RCP, OP_EX2, OP_LG2, OP_SIN, OP_COS, OP_TANH,
    OP_COPYSIGN, OP_TRAP, OP_MUL24, OP_MAD24, OP_CALL, OP_REDUX, OP_WSYNC,
};

/* value types */
enum ptx_ty { TY_NONE, TY_B, TY_U, TY_S, TY_F, TY_PRED };

/* state spaces */
enum ptx_space { SP_GENERIC, SP_GLOBAL, SP_SHARED, SP_LOCAL, SP_PARAM, SP_CONST };

/* rounding: float to float (rn..rp) and to integral (rni..rpi) */
enum ptx_rnd { RND_NONE, RND_RN, RND_RZ, RND_RM, RND_RP, RND_RNI, RND_RZI, RND_RMI, RND_RPI };

enum ptx_cmp {
    CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE,
    CMP_EQU, CMP_NEU, CMP_LTU, CMP_LEU, CMP_GTU, CMP_GEU, CMP_NUM, CMP_NAN,
};

/* sub-operations: mul/mad width, atomics, shfl, vote, setp's bool op */
enum ptx_sub {
    SUB_NONE, SUB_LO, SUB_HI, SUB_WIDE,
    SUB_A_ADD, SUB_A_INC, SUB_A_DEC, SUB_A_EXCH, SUB_A_CAS, SUB_A_MIN, SUB_A_MAX,
    SUB_A_AND, SUB_A_OR, SUB_A_XOR,
    SUB_UP, SUB_DOWN, SUB_BFLY, SUB_IDX,
    SUB_ALL, SUB_ANY, SUB_UNI, SUB_BALLOT,
    SUB_BAND, SUB_BOR, SUB_BXOR,
};

/* special registers */
enum ptx_sreg {
    SR_TID_X, SR_TID_Y, SR_TID_Z, SR_NTID_X, SR_NTID_Y, SR_NTID_Z,
    SR_CTAID_X, SR_CTAID_Y, SR_CTAID_Z, SR_NCTAID_X, SR_NCTAID_Y, SR_NCTAID_Z,
    SR_LANEID, SR_WARPID, SR_NWARPID, SR_SMID, SR_NSMID, SR_GRIDID,
    SR_LANEMASK_EQ, SR_LANEMASK_LT, SR_LANEMASK_LE, SR_LANEMASK_GT, SR_LANEMASK_GE,
    SR_CLOCK, SR_CLOCK64, SR_GLOBALTIMER, SR_DYN_SMEM, SR_TOTAL_SMEM, SR_WARPSZ,
};

enum ptx_okind { OK_NONE, OK_REG, OK_IMM, OK_SREG, OK_ADDR, OK_VEC, OK_LABEL, OK_SINK };

struct ptx_opnd {
    uint8_t kind;
    uint8_t nvec;     /* OK_VEC */
    uint8_t neg;      /* a predicate source written !%p */
    uint8_t has_base; /* OK_ADDR: reg[0] is the base register */
    uint32_t reg[4];  /* OK_REG: reg[0]; OK_VEC: the elements (UINT32_MAX: `_`) */
    uint64_t imm;     /* OK_IMM value, OK_ADDR offset, OK_SREG id, OK_LABEL pc */
};

struct ptx_ins {
    uint8_t op, ty, bits;   /* the (destination) type: class and width */
    uint8_t sty, sbits;     /* cvt: the source type; setp/cmp operands */
    uint8_t space, rnd, cmp, sub, vec;
    uint8_t ftz, sat, approx, space2;
    uint8_t cc;             /* 1: writes the carry flag (.cc), 2: reads it (addc ...) */
    int32_t guard;          /* predicate register, -1: none */
    uint8_t guard_neg;
    uint8_t nops;
    uint8_t fast;           /* enum ptx_fast: set by ptx_prepare() */
    uint8_t wsync;          /* a .sync warp operation: 1 + its membermask's operand index */
    struct ptx_opnd o[6];   /* destination(s) first, as written */
};

/* A call site: the callee's first instruction, and the parameter and
 * return bytes to copy (offsets in the thread's local memory, where both
 * the caller's call-sequence `.param` variables and the callee's
 * parameters live). */
enum { PTX_MAX_ARGS = 16, PTX_MAX_CONSTS = 64 };
struct ptx_call {
    uint32_t target;
    uint32_t func;   /* while decoding: the callee's index */
    uint32_t nargs;
    uint32_t src[PTX_MAX_ARGS], dst[PTX_MAX_ARGS], size[PTX_MAX_ARGS];
    uint32_t ret_from, ret_to, ret_size; /* ret_size 0: nothing returned */
    uint8_t builtin; /* enum ptx_builtin: an external function run on the host */
};

/* The external functions a call may name (no body in the module). */
enum ptx_builtin {
    PTX_BI_NONE,
    PTX_BI_VPRINTF,
    PTX_BI_SETCOND, /* cudaGraphSetConditional(handle .b64, value .b32) */
};

/* Device printf (ptx_printf.c): fmt and the argument buffer as vprintf
 * receives them, formatted into *out (sim_malloc'ed, *len bytes). Returns
 * what printf() returns on the device: the number of arguments parsed, -1
 * for a NULL format (*out NULL), -2 when out of memory. */
int ptx_format(const char *fmt, const unsigned char *args, char **out, size_t *len);

struct ptx_kernel {
    struct ptx_module *mod;
    struct ptx_call *calls; /* OP_CALL: o[0].imm indexes this */
    size_t ncalls;
    char *name;
    /* set: cannot run, errbuf says why (a flag, not a pointer into errbuf:
     * the kernel array moves while later entries are decoded) */
    bool error;
    char errbuf[96];
    struct ptx_ins *ins;
    size_t nins;
    uint32_t nregs;         /* constant registers included */
    /* Constant registers (ptx_prepare): creg0 + i holds cval[i] in every
     * lane, filled when a launch starts and never written, so the
     * specialised loops read an immediate operand as a register row. */
    uint32_t creg0, nconst;
    /* Its result may depend on the order blocks run in beyond what any
     * interleaving of GPU blocks would change, or it prints: one worker
     * runs its blocks, in order (ptx_prepare). */
    bool serial;
    uint64_t cval[PTX_MAX_CONSTS];
    size_t shared_static;   /* bytes; dynamic shared starts at shared_dyn_off */
    size_t shared_dyn_off;
    size_t local_bytes;
    uint32_t shared_align;
};

/* A module-scope .global or .const variable: where it lies in globals. */
struct ptx_gvar {
    char *name;
    size_t off, size;
};

struct ptx_module {
    atomic_long refs;
    struct ptx_kernel *kernels;
    size_t nkernels;
    unsigned char *globals; /* module-scope .global/.const storage */
    size_t globals_size;
    struct ptx_gvar *vars;  /* every variable in globals, by name */
    size_t nvars;
};

/* Picks, once per decoded kernel, the instructions ptx_exec.c runs through
 * a specialised loop (their operands' kinds and modifiers known), so a
 * launch does not re-examine them for every warp. */
void ptx_prepare(struct ptx_kernel *k);

#endif
