/*
 * PTX decoding (contract: ptx.h): the text of a module becomes, once, an
 * instruction array per `.entry` with registers, symbols and labels
 * resolved (ptx_int.h). Anything this decoder does not know exactly (an
 * opcode, a modifier that would change the meaning, an operand form) marks
 * the kernel as not runnable with a message naming it, rather than being
 * guessed at: the interpreter never computes a wrong result silently.
 */
#include "ptx_int.h"
#include "sim.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- text helpers --------------------------------------------------------- */

/* sim.h: also the module loader's. */
char *sim_strip_comments(const char *src)
{
    size_t n = strlen(src);
    char *d = sim_malloc(n + 1);
    if (!d)
        return NULL;
    size_t i = 0;
    while (i < n) {
        if (src[i] == '"') {
            d[i] = src[i];
            i++;
            while (i < n && src[i] != '"' && src[i] != '\n') {
                d[i] = src[i];
                i++;
            }
            if (i < n) {
                d[i] = src[i];
                i++;
            }
        } else if (src[i] == '/' && i + 1 < n && src[i + 1] == '/') {
            while (i < n && src[i] != '\n')
                d[i++] = ' ';
        } else if (src[i] == '/' && i + 1 < n && src[i + 1] == '*') {
            d[i++] = ' ';
            d[i++] = ' ';
            while (i < n && !(src[i] == '*' && i + 1 < n && src[i + 1] == '/')) {
                d[i] = src[i] == '\n' ? '\n' : ' ';
                i++;
            }
            if (i < n) {
                d[i++] = ' ';
                d[i++] = ' ';
            }
        } else {
            d[i] = src[i];
            i++;
        }
    }
    d[n] = 0;
    return d;
}

static bool idc(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '$' || c == '.' || c == '%';
}

static const char *skipws(const char *p)
{
    while (*p && isspace((unsigned char)*p))
        p++;
    return p;
}

static bool tokeq(const char *t, size_t n, const char *lit)
{
    return strlen(lit) == n && memcmp(t, lit, n) == 0;
}

/* A word: a run of identifier characters. */
static const char *word(const char *p, size_t *n)
{
    p = skipws(p);
    const char *s = p;
    while (*p && idc(*p))
        p++;
    *n = (size_t)(p - s);
    return s;
}

/* ---- types ----------------------------------------------------------------- */

static bool parse_type(const char *t, size_t n, uint8_t *ty, uint8_t *bits)
{
    static const struct {
        const char *s;
        uint8_t ty, bits;
    } types[] = {
        {".b8", TY_B, 8},   {".b16", TY_B, 16}, {".b32", TY_B, 32}, {".b64", TY_B, 64},
        {".u8", TY_U, 8},   {".u16", TY_U, 16}, {".u32", TY_U, 32}, {".u64", TY_U, 64},
        {".s8", TY_S, 8},   {".s16", TY_S, 16}, {".s32", TY_S, 32}, {".s64", TY_S, 64},
        {".f32", TY_F, 32}, {".f64", TY_F, 64}, {".pred", TY_PRED, 1},
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (tokeq(t, n, types[i].s)) {
            *ty = types[i].ty;
            *bits = types[i].bits;
            return true;
        }
    return false;
}

/* ---- decoding state ------------------------------------------------------------ */

struct rfam {
    char name[40];
    uint32_t base, count;
    bool family; /* %r<N>: %r0 .. %rN-1 */
};

struct sym {
    char name[96];
    uint64_t value;
    uint64_t size;
    uint8_t space;
    bool dyn_shared; /* value resolved when the static shared size is known */
};

struct label {
    char name[64];
    uint32_t pc;
};

struct func;

struct dec {
    struct ptx_kernel *k;
    struct rfam *fams;
    size_t nfams, capfams;
    uint32_t nregs;
    struct sym *syms;
    size_t nsyms, capsyms;
    size_t nsyms_module; /* module-scope symbols stay from entry to entry */
    struct label *labels;
    size_t nlabels, caplabels;
    size_t shared_off, local_off;
    uint32_t shared_align;
    bool oom;
    uint8_t addr_space; /* the space of the last address operand's symbol */
    bool in_func;       /* decoding a .func body (no .shared there) */
    size_t capcalls;
    struct func *funcs;
    size_t nfuncs;
};

/* A module's `.func` definitions (found once per module). */
struct func {
    const char *name;
    size_t nlen;
    const char *ret, *ret_end;       /* "(.param ... retval)" contents, or NULL */
    const char *params, *params_end; /* parameter list contents, or NULL */
    const char *body, *body_end;     /* NULL: a prototype */
    /* per kernel while decoding */
    uint32_t start;
    uint32_t nparams, poff[PTX_MAX_ARGS], psize[PTX_MAX_ARGS];
    uint32_t roff, rsize;
};

static bool grow(void **v, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return true;
    size_t nc = *cap ? *cap * 2 : 16;
    void *nv = sim_realloc(*v, nc * elem);
    if (!nv)
        return false;
    *v = nv;
    *cap = nc;
    return true;
}

static void fail(struct dec *d, const char *what, const char *t, size_t n)
{
    struct ptx_kernel *k = d->k;
    if (!k || k->error)
        return;
    snprintf(k->errbuf, sizeof k->errbuf, "%s '%.*s'", what, (int)(n > 60 ? 60 : n), t);
    k->error = true;
}

static struct sym *sym_add(struct dec *d, const char *name, size_t n)
{
    if (!grow((void **)&d->syms, &d->capsyms, d->nsyms, sizeof *d->syms)) {
        d->oom = true;
        return NULL;
    }
    struct sym *s = &d->syms[d->nsyms++];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%.*s", (int)n, name);
    return s;
}

static struct sym *sym_find(struct dec *d, const char *name, size_t n)
{
    for (size_t i = d->nsyms; i-- > 0;)
        if (tokeq(name, n, d->syms[i].name))
            return &d->syms[i];
    return NULL;
}

static int64_t reg_find(struct dec *d, const char *t, size_t n)
{
    for (size_t i = d->nfams; i-- > 0;) /* innermost scope first */
        if (!d->fams[i].family && tokeq(t, n, d->fams[i].name))
            return d->fams[i].base;
    size_t e = n;
    while (e > 0 && isdigit((unsigned char)t[e - 1]))
        e--;
    if (e == n || e == 0)
        return -1;
    unsigned long idx = strtoul(t + e, NULL, 10);
    for (size_t i = d->nfams; i-- > 0;)
        if (d->fams[i].family && tokeq(t, e, d->fams[i].name) && idx < d->fams[i].count)
            return d->fams[i].base + (uint32_t)idx;
    return -1;
}

/* `.reg .type a, b<N>, c;` */
static void decl_reg(struct dec *d, const char *p, const char *end)
{
    size_t n;
    const char *t = word(p, &n); /* .reg */
    p = t + n;
    t = word(p, &n); /* type (possibly .v2 first) */
    p = t + n;
    if (tokeq(t, n, ".v2") || tokeq(t, n, ".v4")) {
        fail(d, "unsupported vector register declaration", t, n);
        return;
    }
    while (p < end) {
        p = skipws(p);
        if (*p == ',') {
            p++;
            continue;
        }
        t = word(p, &n);
        if (!n)
            break;
        p = t + n;
        if (!grow((void **)&d->fams, &d->capfams, d->nfams, sizeof *d->fams)) {
            d->oom = true;
            return;
        }
        struct rfam *f = &d->fams[d->nfams++];
        memset(f, 0, sizeof *f);
        snprintf(f->name, sizeof f->name, "%.*s", (int)n, t);
        f->base = d->nregs;
        p = skipws(p);
        if (*p == '<') {
            unsigned long c = strtoul(p + 1, (char **)&p, 10);
            if (*p == '>')
                p++;
            f->family = true;
            f->count = (uint32_t)c;
            d->nregs += (uint32_t)c;
        } else {
            f->count = 1;
            d->nregs++;
        }
    }
}

/* A variable declaration `[.align N] .type name[[N]]...[ = {...}]`: its size
 * and alignment; *name set. */
static bool decl_var(const char *p, const char *end, const char **name, size_t *nlen,
                     size_t *size, size_t *align, const char **init)
{
    size_t elem = 0, count = 1, al = 0, vec = 1;
    bool unsized = false;
    *name = NULL;
    *init = NULL;
    while (p < end) {
        p = skipws(p);
        if (p >= end)
            break;
        if (*p == '=') {
            *init = p + 1;
            break;
        }
        if (*p == '(') { /* `.attribute(.managed)` */
            while (p < end && *p != ')')
                p++;
            if (p < end)
                p++;
            continue;
        }
        if (*p == '[') {
            p++;
            if (*p == ']') {
                unsized = true;
                p++;
                continue;
            }
            unsigned long long m = strtoull(p, (char **)&p, 0);
            count *= (size_t)m;
            while (p < end && *p != ']')
                p++;
            if (p < end)
                p++;
            continue;
        }
        size_t n;
        const char *t = word(p, &n);
        if (!n)
            return false;
        p = t + n;
        uint8_t ty, bits;
        if (tokeq(t, n, ".align")) {
            al = strtoul(p, (char **)&p, 10);
        } else if (tokeq(t, n, ".v2")) {
            vec = 2;
        } else if (tokeq(t, n, ".v4")) {
            vec = 4;
        } else if (parse_type(t, n, &ty, &bits)) {
            elem = bits == 1 ? 1 : bits / 8;
        } else if (*t == '.') {
            continue; /* .global, .shared, .extern, .visible, .ptr ... */
        } else {
            *name = t;
            *nlen = n;
        }
    }
    if (!*name || !elem)
        return false;
    *size = unsized ? 0 : elem * vec * count;
    *align = al ? al : elem * vec;
    return true;
}

/* ---- operands ----------------------------------------------------------------- */

static const struct {
    const char *s;
    uint8_t id;
} g_sregs[] = {
    {"%tid.x", SR_TID_X},       {"%tid.y", SR_TID_Y},        {"%tid.z", SR_TID_Z},
    {"%ntid.x", SR_NTID_X},     {"%ntid.y", SR_NTID_Y},      {"%ntid.z", SR_NTID_Z},
    {"%ctaid.x", SR_CTAID_X},   {"%ctaid.y", SR_CTAID_Y},    {"%ctaid.z", SR_CTAID_Z},
    {"%nctaid.x", SR_NCTAID_X}, {"%nctaid.y", SR_NCTAID_Y},  {"%nctaid.z", SR_NCTAID_Z},
    {"%laneid", SR_LANEID},     {"%warpid", SR_WARPID},      {"%nwarpid", SR_NWARPID},
    {"%smid", SR_SMID},         {"%nsmid", SR_NSMID},        {"%gridid", SR_GRIDID},
    {"%lanemask_eq", SR_LANEMASK_EQ}, {"%lanemask_lt", SR_LANEMASK_LT},
    {"%lanemask_le", SR_LANEMASK_LE}, {"%lanemask_gt", SR_LANEMASK_GT},
    {"%lanemask_ge", SR_LANEMASK_GE}, {"%clock", SR_CLOCK},  {"%clock64", SR_CLOCK64},
    {"%globaltimer", SR_GLOBALTIMER}, {"%dynamic_smem_size", SR_DYN_SMEM},
    {"%total_smem_size", SR_TOTAL_SMEM}, {"WARP_SZ", SR_WARPSZ},
};

static bool parse_imm(const char *t, size_t n, uint8_t ty, uint8_t bits, uint64_t *out)
{
    char buf[80];
    if (n == 0 || n >= sizeof buf)
        return false;
    memcpy(buf, t, n);
    buf[n] = 0;
    const char *s = buf;
    bool neg = false;
    if (*s == '-') {
        neg = true;
        s++;
    }
    char *e;
    if ((s[0] == '0') && (s[1] == 'f' || s[1] == 'F') && n >= 10) {
        uint64_t v = strtoull(s + 2, &e, 16);
        if (*e)
            return false;
        if (ty == TY_F && bits == 64) { /* an f32 literal used as f64 */
            float f;
            uint32_t u = (uint32_t)v;
            memcpy(&f, &u, 4);
            double dd = neg ? -(double)f : (double)f;
            memcpy(&v, &dd, 8);
        } else if (neg) {
            v ^= 0x80000000u;
        }
        *out = v;
        return true;
    }
    if ((s[0] == '0') && (s[1] == 'd' || s[1] == 'D') && n >= 18) {
        uint64_t v = strtoull(s + 2, &e, 16);
        if (*e)
            return false;
        if (ty == TY_F && bits == 32) {
            double dd;
            memcpy(&dd, &v, 8);
            float f = (float)(neg ? -dd : dd);
            uint32_t u;
            memcpy(&u, &f, 4);
            v = u;
        } else if (neg) {
            v ^= 0x8000000000000000ull;
        }
        *out = v;
        return true;
    }
    if (!isdigit((unsigned char)*s))
        return false;
    bool isfloat = strpbrk(s, ".eE") && !(s[0] == '0' && (s[1] == 'x' || s[1] == 'X'));
    if (isfloat) {
        double dd = strtod(s, &e);
        if (*e)
            return false;
        if (neg)
            dd = -dd;
        if (ty == TY_F && bits == 32) {
            float f = (float)dd;
            uint32_t u;
            memcpy(&u, &f, 4);
            *out = u;
        } else {
            memcpy(out, &dd, 8);
        }
        return true;
    }
    uint64_t v = strtoull(s, &e, 0);
    if (*e == 'U')
        e++;
    if (*e)
        return false;
    if (ty == TY_F) { /* an integer literal where a float is wanted */
        double dd = neg ? -(double)v : (double)v;
        if (bits == 32) {
            float f = (float)dd;
            uint32_t u;
            memcpy(&u, &f, 4);
            v = u;
        } else {
            memcpy(&v, &dd, 8);
        }
        *out = v;
        return true;
    }
    *out = neg ? 0 - v : v; /* unsigned: -INT64_MIN wraps as the PTX literal means */
    if (bits && bits < 64)
        *out &= (1ull << bits) - 1;
    return true;
}

/* One operand (trimmed text t..t+n). */
static bool parse_opnd(struct dec *d, const char *t, size_t n, uint8_t ty, uint8_t bits,
                       bool label_ok, struct ptx_opnd *o)
{
    memset(o, 0, sizeof *o);
    while (n && isspace((unsigned char)t[n - 1]))
        n--;
    while (n && isspace((unsigned char)*t)) {
        t++;
        n--;
    }
    if (!n)
        return false;
    if (*t == '!') {
        o->neg = 1;
        t++;
        n--;
    }
    if (*t == '{') {
        o->kind = OK_VEC;
        const char *p = t + 1, *end = t + n;
        while (p < end && *p != '}') {
            p = skipws(p);
            const char *s = p;
            while (p < end && *p != ',' && *p != '}')
                p++;
            size_t m = (size_t)(p - s);
            while (m && isspace((unsigned char)s[m - 1]))
                m--;
            if (o->nvec >= 4)
                return false;
            if (tokeq(s, m, "_")) {
                o->reg[o->nvec++] = UINT32_MAX;
            } else {
                int64_t r = reg_find(d, s, m);
                if (r < 0)
                    return false;
                o->reg[o->nvec++] = (uint32_t)r;
            }
            if (p < end && *p == ',')
                p++;
        }
        return o->nvec > 0;
    }
    if (*t == '[') {
        o->kind = OK_ADDR;
        const char *p = t + 1, *end = t + n;
        while (end > p && end[-1] != ']')
            end--;
        if (end <= p)
            return false;
        end--; /* at ']' */
        p = skipws(p);
        const char *s = p;
        while (p < end && *p != '+' && *p != '-' && !isspace((unsigned char)*p))
            p++;
        if (p == s && *p == '-')
            p++; /* [-4]: a bare negative address */
        size_t m = (size_t)(p - s);
        int64_t r = reg_find(d, s, m);
        if (r >= 0) {
            o->has_base = 1;
            o->reg[0] = (uint32_t)r;
        } else {
            struct sym *sy = sym_find(d, s, m);
            uint64_t v;
            if (sy) {
                o->imm = sy->value;
                d->addr_space = sy->space;
            }
            else if (parse_imm(s, (size_t)(end - s), TY_U, 64, &v)) {
                o->imm = v;
                return true;
            } else {
                return false;
            }
        }
        p = skipws(p);
        if (p < end) {
            bool neg = *p == '-';
            if (*p != '+' && *p != '-')
                return false;
            p = skipws(p + 1);
            if (*p == '-') {
                neg = !neg;
                p++;
            }
            char *e;
            long long off = strtoll(p, &e, 0);
            if (skipws(e) != end)
                return false;
            o->imm += (uint64_t)(neg ? -off : off);
        }
        return true;
    }
    if (tokeq(t, n, "_")) {
        o->kind = OK_SINK;
        return true;
    }
    if (*t == '%' || tokeq(t, n, "WARP_SZ") || isalpha((unsigned char)*t) || *t == '_' ||
        *t == '$') {
        /* registers need no `%`: inline asm declares `{ .reg .pred p; ...}` */
        int64_t r = reg_find(d, t, n);
        if (r >= 0) {
            o->kind = OK_REG;
            o->reg[0] = (uint32_t)r;
            return true;
        }
    }
    if (*t == '%' || tokeq(t, n, "WARP_SZ")) {
        for (size_t i = 0; i < sizeof g_sregs / sizeof g_sregs[0]; i++)
            if (tokeq(t, n, g_sregs[i].s)) {
                o->kind = OK_SREG;
                o->imm = g_sregs[i].id;
                return true;
            }
        return false;
    }
    uint64_t v;
    if (parse_imm(t, n, ty, bits, &v)) {
        o->kind = OK_IMM;
        o->imm = v;
        return true;
    }
    struct sym *sy = sym_find(d, t, n);
    if (sy) {
        o->kind = OK_IMM;
        o->imm = sy->value;
        return true;
    }
    if (label_ok) {
        for (size_t i = 0; i < d->nlabels; i++)
            if (tokeq(t, n, d->labels[i].name)) {
                o->kind = OK_LABEL;
                o->imm = d->labels[i].pc;
                return true;
            }
    }
    return false;
}

/* ---- instructions -------------------------------------------------------------- */

static const struct {
    const char *s;
    uint8_t op;
} g_ops[] = {
    {"mov", OP_MOV},       {"ld", OP_LD},         {"ldu", OP_LD},       {"st", OP_ST},
    {"cvta", OP_CVTA},     {"cvt", OP_CVT},       {"add", OP_ADD},      {"sub", OP_SUB},
    {"mul", OP_MUL},       {"mad", OP_MAD},       {"fma", OP_FMA},      {"div", OP_DIV},
    {"rem", OP_REM},       {"abs", OP_ABS},       {"neg", OP_NEG},      {"min", OP_MIN},
    {"max", OP_MAX},       {"and", OP_AND},       {"or", OP_OR},        {"xor", OP_XOR},
    {"not", OP_NOT},       {"cnot", OP_CNOT},     {"shl", OP_SHL},      {"shr", OP_SHR},
    {"popc", OP_POPC},     {"clz", OP_CLZ},       {"brev", OP_BREV},    {"bfe", OP_BFE},
    {"bfi", OP_BFI},       {"lop3", OP_LOP3},     {"prmt", OP_PRMT},    {"setp", OP_SETP},
    {"selp", OP_SELP},     {"bra", OP_BRA},       {"ret", OP_RET},      {"exit", OP_RET},
    {"bar", OP_BAR},       {"barrier", OP_BAR},   {"membar", OP_NOP},   {"fence", OP_NOP},
    {"atom", OP_ATOM},     {"red", OP_RED},       {"shfl", OP_SHFL},    {"vote", OP_VOTE},
    {"activemask", OP_ACTIVEMASK},                {"match", OP_MATCH},  {"sqrt", OP_SQRT},
    {"rsqrt", OP_RSQRT},   {"rcp", OP_RCP},       {"ex2", OP_EX2},      {"lg2", OP_LG2},
    {"sin", OP_SIN},       {"cos", OP_COS},       {"tanh", OP_TANH},    {"copysign", OP_COPYSIGN},
    {"trap", OP_TRAP},     {"mul24", OP_MUL24},   {"mad24", OP_MAD24},  {"prefetch", OP_NOP},
    {"prefetchu", OP_NOP}, {"pmevent", OP_NOP},   {"nanosleep", OP_NOP},
    {"call", OP_CALL},     {"addc", OP_ADD},      {"subc", OP_SUB},     {"madc", OP_MAD},
    {"redux", OP_REDUX},
};

/* Modifiers that change nothing in a sequential, coherent memory model. */
static const char *const g_ignored[] = {
    ".sync", ".aligned", ".uni", ".volatile", ".relaxed", ".acquire", ".release",
    ".acq_rel", ".sc", ".weak", ".cta", ".gpu", ".sys", ".cluster", ".nc", ".ca", ".cg",
    ".cs", ".lu", ".cv", ".wb", ".wt", ".full", ".noftz", ".L1::evict_normal",
    ".L1::evict_last", ".L1::evict_first", ".L1::no_allocate", ".L2::64B", ".L2::128B",
    ".L2::256B", ".mmio", ".proxy", ".alias", ".gl",
};

static bool modifier(struct dec *d, struct ptx_ins *in, const char *t, size_t n, int *ntypes)
{
    (void)d;
    uint8_t ty, bits;
    if (parse_type(t, n, &ty, &bits)) {
        if ((*ntypes)++ == 0) {
            in->ty = ty;
            in->bits = bits;
        } else {
            in->sty = ty;
            in->sbits = bits;
        }
        return true;
    }
    for (size_t i = 0; i < sizeof g_ignored / sizeof g_ignored[0]; i++)
        if (tokeq(t, n, g_ignored[i]))
            return true;
    static const struct {
        const char *s;
        uint8_t space;
    } spaces[] = {
        {".global", SP_GLOBAL}, {".shared", SP_SHARED}, {".shared::cta", SP_SHARED},
        {".local", SP_LOCAL},   {".param", SP_PARAM},   {".const", SP_CONST},
    };
    for (size_t i = 0; i < sizeof spaces / sizeof spaces[0]; i++)
        if (tokeq(t, n, spaces[i].s)) {
            in->space = spaces[i].space;
            return true;
        }
    static const struct {
        const char *s;
        uint8_t rnd;
    } rnds[] = {
        {".rn", RND_RN},   {".rz", RND_RZ},   {".rm", RND_RM},   {".rp", RND_RP},
        {".rni", RND_RNI}, {".rzi", RND_RZI}, {".rmi", RND_RMI}, {".rpi", RND_RPI},
    };
    for (size_t i = 0; i < sizeof rnds / sizeof rnds[0]; i++)
        if (tokeq(t, n, rnds[i].s)) {
            in->rnd = rnds[i].rnd;
            return true;
        }
    if (in->op == OP_SETP) {
        static const struct {
            const char *s;
            uint8_t c;
        } cmps[] = {
            {".eq", CMP_EQ},   {".ne", CMP_NE},   {".lt", CMP_LT},   {".le", CMP_LE},
            {".gt", CMP_GT},   {".ge", CMP_GE},   {".lo", CMP_LT},   {".ls", CMP_LE},
            {".hi", CMP_GT},   {".hs", CMP_GE},   {".equ", CMP_EQU}, {".neu", CMP_NEU},
            {".ltu", CMP_LTU}, {".leu", CMP_LEU}, {".gtu", CMP_GTU}, {".geu", CMP_GEU},
            {".num", CMP_NUM}, {".nan", CMP_NAN},
        };
        for (size_t i = 0; i < sizeof cmps / sizeof cmps[0]; i++)
            if (tokeq(t, n, cmps[i].s)) {
                in->cmp = cmps[i].c;
                return true;
            }
        if (tokeq(t, n, ".and")) {
            in->sub = SUB_BAND;
            return true;
        }
        if (tokeq(t, n, ".or")) {
            in->sub = SUB_BOR;
            return true;
        }
        if (tokeq(t, n, ".xor")) {
            in->sub = SUB_BXOR;
            return true;
        }
        return false;
    }
    static const struct {
        const char *s;
        uint8_t sub;
    } subs[] = {
        {".lo", SUB_LO},       {".hi", SUB_HI},        {".wide", SUB_WIDE},
        {".add", SUB_A_ADD},   {".inc", SUB_A_INC},    {".dec", SUB_A_DEC},
        {".exch", SUB_A_EXCH}, {".cas", SUB_A_CAS},    {".min", SUB_A_MIN},
        {".max", SUB_A_MAX},   {".and", SUB_A_AND},    {".or", SUB_A_OR},
        {".xor", SUB_A_XOR},   {".up", SUB_UP},        {".down", SUB_DOWN},
        {".bfly", SUB_BFLY},   {".idx", SUB_IDX},      {".all", SUB_ALL},
        {".any", SUB_ANY},     {".uni", SUB_UNI},      {".ballot", SUB_BALLOT},
    };
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        if (tokeq(t, n, subs[i].s)) {
            in->sub = subs[i].sub;
            return true;
        }
    if (tokeq(t, n, ".cc") && (in->op == OP_ADD || in->op == OP_SUB || in->op == OP_MAD)) {
        in->cc |= 1;
        return true;
    }
    if (tokeq(t, n, ".ftz")) {
        in->ftz = 1;
        return true;
    }
    if (tokeq(t, n, ".sat")) {
        in->sat = 1;
        return true;
    }
    if (tokeq(t, n, ".approx")) {
        in->approx = 1;
        return true;
    }
    if (tokeq(t, n, ".to")) {
        in->space2 = 1;
        return true;
    }
    if (in->op == OP_BAR && tokeq(t, n, ".warp")) {
        in->space2 = 2;
        return true;
    }
    if (in->op == OP_BAR && tokeq(t, n, ".red")) {
        in->space2 = 3; /* bar.red.{popc,and,or}: d, id, {!}c */
        return true;
    }
    if (in->op == OP_BAR && tokeq(t, n, ".popc")) {
        in->sub = SUB_A_ADD;
        return true;
    }
    if (tokeq(t, n, ".v2")) {
        in->vec = 2;
        return true;
    }
    if (tokeq(t, n, ".v4")) {
        in->vec = 4;
        return true;
    }
    if (in->op == OP_PRMT && tokeq(t, n, ".b4e")) /* other prmt modes: unsupported */
        return false;
    return false;
}

/* The fewest operands each instruction takes (the interpreter reads them
 * unchecked). */
static unsigned min_operands(uint8_t op)
{
    switch (op) {
    case OP_BRA: return 1;
    case OP_RET: case OP_NOP: case OP_TRAP: case OP_BAR: case OP_CALL: return 0;
    case OP_ACTIVEMASK: case OP_RED: case OP_WSYNC: return 1 + (op == OP_RED);
    case OP_MOV: case OP_LD: case OP_ST: case OP_CVTA: case OP_CVTA_TO: case OP_CVT:
    case OP_ABS: case OP_NEG: case OP_NOT: case OP_CNOT: case OP_POPC: case OP_CLZ:
    case OP_BREV: case OP_SQRT: case OP_RSQRT: case OP_RCP: case OP_EX2: case OP_LG2:
    case OP_SIN: case OP_COS: case OP_TANH:
        return 2;
    case OP_MAD: case OP_FMA: case OP_SELP: case OP_BFE: case OP_PRMT: case OP_MAD24:
        return 4;
    case OP_BFI: case OP_LOP3: case OP_SHFL: return 5;
    case OP_VOTE: case OP_MATCH: case OP_REDUX: return 3;
    default: return 3;
    }
}

/* Checks that the decoded form is one the interpreter runs. */
static bool ins_ok(const struct ptx_ins *in)
{
    if (in->nops < min_operands(in->op))
        return false;
    /* every destination a register (or a vector of them, or `_`) */
    bool has_dest = in->op != OP_BRA && in->op != OP_RET && in->op != OP_NOP &&
                    in->op != OP_CALL && in->op != OP_WSYNC &&
                    in->op != OP_TRAP && in->op != OP_BAR && in->op != OP_ST &&
                    in->op != OP_RED;
    if (has_dest && in->o[0].kind != OK_REG && in->o[0].kind != OK_SINK &&
        !(in->o[0].kind == OK_VEC && (in->op == OP_LD || in->op == OP_MOV)))
        return false;
    if (has_dest && in->o[0].kind == OK_SINK && in->op != OP_SETP && in->op != OP_ATOM)
        return false;
    if (in->op == OP_SETP && in->o[0].kind == OK_SINK && in->o[5].kind != OK_REG)
        return false;
    if ((in->op == OP_LD || in->op == OP_ST || in->op == OP_ATOM || in->op == OP_RED) &&
        in->o[in->op == OP_LD || in->op == OP_ATOM ? 1 : 0].kind != OK_ADDR)
        return false;
    if ((in->op == OP_LD && in->vec && in->o[0].kind != OK_VEC) ||
        (in->op == OP_ST && in->vec && in->o[1].kind != OK_VEC))
        return false;
    if (in->op == OP_BRA && in->o[0].kind != OK_LABEL)
        return false;
    if (in->cc && (in->ty == TY_F || in->bits < 32 || in->sat || in->sub == SUB_WIDE))
        return false;
    switch (in->op) {
    case OP_BAR: /* bar.sync / barrier.sync id, bar.red: only the whole block */
        if (in->space2 == 3)
            return in->nops == 3 && in->o[0].kind == OK_REG &&
                   (in->sub == SUB_A_ADD || in->sub == SUB_A_AND || in->sub == SUB_A_OR);
        return in->nops == 1 && in->sub == SUB_NONE;
    case OP_ATOM:
    case OP_RED:
        return in->sub >= SUB_A_ADD && in->sub <= SUB_A_XOR &&
               (in->bits == 32 || in->bits == 64) && in->vec == 0 &&
               (in->space == SP_GLOBAL || in->space == SP_SHARED || in->space == SP_GENERIC);
    case OP_SHFL:
        return in->sub >= SUB_UP && in->sub <= SUB_IDX && in->bits == 32;
    case OP_VOTE:
        return in->sub >= SUB_ALL && in->sub <= SUB_BALLOT;
    case OP_MATCH:
        return (in->sub == SUB_ANY || in->sub == SUB_ALL) && in->bits >= 32;
    case OP_LD:
    case OP_ST:
        return in->bits >= 8 && in->ty != TY_PRED;
    case OP_CVT:
        return in->sty != TY_NONE && in->sty != TY_PRED && in->ty != TY_PRED;
    case OP_PRMT:
        return in->nops == 4;
    case OP_MUL24:
    case OP_MAD24:
        return (in->sub == SUB_LO || in->sub == SUB_HI) && in->bits == 32 && in->ty != TY_F;
    case OP_REDUX: /* .add/.min/.max on .u32/.s32, .and/.or/.xor on .b32 */
        return in->nops == 3 && in->bits == 32 &&
               (in->sub == SUB_A_ADD || in->sub == SUB_A_MIN || in->sub == SUB_A_MAX
                    ? in->ty == TY_U || in->ty == TY_S
                    : (in->sub == SUB_A_AND || in->sub == SUB_A_OR || in->sub == SUB_A_XOR) &&
                          in->ty == TY_B);
    case OP_WSYNC:
        return in->nops == 1;
    default:
        return true;
    }
}

/* A local (call-sequence) symbol by name, or NULL. */
static struct sym *local_sym(struct dec *d, const char *t, size_t n)
{
    struct sym *sy = sym_find(d, t, n);
    return sy && sy->space == SP_LOCAL ? sy : NULL;
}

/* `call[.uni] [(ret),] fname[, (args)]`: a direct call of a module .func. */
static void decode_call(struct dec *d, struct ptx_ins *in, const char *p, const char *end)
{
    struct ptx_kernel *k = d->k;
    struct ptx_call c;
    memset(&c, 0, sizeof c);
    p = skipws(p);
    if (*p == '(') {
        size_t n;
        const char *t = word(p + 1, &n);
        struct sym *sy = local_sym(d, t, n);
        const char *close = memchr(p, ')', (size_t)(end - p));
        if (!sy || !close || skipws(t + n) != close) {
            fail(d, "unsupported call return", p, (size_t)(end - p));
            return;
        }
        c.ret_to = (uint32_t)sy->value;
        c.ret_size = (uint32_t)sy->size;
        p = skipws(close + 1);
        if (*p == ',')
            p++;
    }
    size_t n;
    const char *fn = word(p, &n);
    size_t fi = d->nfuncs;
    for (size_t i = 0; i < d->nfuncs; i++)
        if (d->funcs[i].nlen == n && memcmp(d->funcs[i].name, fn, n) == 0)
            fi = i;
    if (fi == d->nfuncs) {
        fail(d, "unsupported call of", fn, n);
        return;
    }
    c.func = (uint32_t)fi;
    p = skipws(fn + n);
    if (*p == ',') {
        p = skipws(p + 1);
        if (*p != '(') {
            fail(d, "unsupported call form", fn, n);
            return;
        }
        p++;
        for (;;) {
            const char *t = word(p, &n);
            if (!n)
                break;
            struct sym *sy = local_sym(d, t, n);
            if (!sy || c.nargs == PTX_MAX_ARGS) {
                fail(d, "unsupported call argument", t, n);
                return;
            }
            c.src[c.nargs] = (uint32_t)sy->value;
            c.size[c.nargs++] = (uint32_t)sy->size;
            p = skipws(t + n);
            if (*p == ',')
                p++;
        }
        p = skipws(p);
        if (*p != ')') {
            fail(d, "unsupported call form", fn, n);
            return;
        }
        p++;
    }
    if (skipws(p) < end) {
        fail(d, "unsupported call form (indirect or prototype)", fn, n);
        return;
    }
    if (!grow((void **)&k->calls, &d->capcalls, k->ncalls, sizeof *k->calls)) {
        d->oom = true;
        return;
    }
    in->o[0].kind = OK_IMM;
    in->o[0].imm = k->ncalls;
    k->calls[k->ncalls++] = c;
}

static void decode_ins(struct dec *d, const char *p, const char *end, struct ptx_ins *in)
{
    d->addr_space = SP_GENERIC;
    memset(in, 0, sizeof *in);
    in->guard = -1;
    p = skipws(p);
    if (*p == '@') {
        p++;
        if (*p == '!') {
            in->guard_neg = 1;
            p++;
        }
        size_t n;
        const char *t = word(p, &n);
        int64_t r = reg_find(d, t, n);
        if (r < 0) {
            fail(d, "unknown guard predicate", t, n);
            return;
        }
        in->guard = (int32_t)r;
        p = t + n;
    }
    p = skipws(p);
    const char *opc = p;
    while (p < end && !isspace((unsigned char)*p))
        p++;
    size_t oplen = (size_t)(p - opc);
    const char *dot = memchr(opc, '.', oplen);
    size_t blen = dot ? (size_t)(dot - opc) : oplen;
    for (size_t i = 0; i < sizeof g_ops / sizeof g_ops[0]; i++)
        if (tokeq(opc, blen, g_ops[i].s)) {
            in->op = g_ops[i].op;
            break;
        }
    if (tokeq(opc, blen, "addc") || tokeq(opc, blen, "subc") || tokeq(opc, blen, "madc"))
        in->cc = 2; /* carry in */
    if (!in->op) {
        fail(d, "unsupported PTX instruction", opc, oplen);
        return;
    }
    int ntypes = 0;
    for (const char *m = dot; m && m < opc + oplen;) {
        const char *nx = memchr(m + 1, '.', (size_t)(opc + oplen - m - 1));
        /* `.L1::evict_last` and friends contain no further dots */
        size_t mlen = (size_t)((nx ? nx : opc + oplen) - m);
        if (!modifier(d, in, m, mlen, &ntypes)) {
            fail(d, "unsupported PTX instruction", opc, oplen);
            return;
        }
        m = nx;
    }
    if (in->op == OP_CALL) {
        decode_call(d, in, p, end);
        return;
    }
    if (in->op == OP_CVTA && in->space2)
        in->op = OP_CVTA_TO;
    if (in->op == OP_BAR && in->space2 == 2)
        in->op = OP_WSYNC; /* bar.warp.sync membermask */
    if (in->op == OP_CVT && ntypes < 2) {
        fail(d, "unsupported PTX instruction", opc, oplen);
        return;
    }
    if (in->op == OP_SETP && ntypes == 1) {
        in->sty = in->ty;
        in->sbits = in->bits;
    }
    /* operands, split at top-level commas; `a|b` is two destinations */
    bool label_ok = in->op == OP_BRA;
    uint8_t oty = in->ty, obits = in->bits;
    while (p < end && in->nops < 5) {
        p = skipws(p);
        if (p >= end)
            break;
        const char *s = p;
        int depth = 0;
        while (p < end && (depth || (*p != ',' && *p != '|'))) {
            if (*p == '{' || *p == '[')
                depth++;
            else if (*p == '}' || *p == ']')
                depth--;
            p++;
        }
        uint8_t ty = oty, bits = obits;
        if (in->op == OP_SETP && in->nops >= 1) {
            ty = in->sty;
            bits = in->sbits;
        }
        if (in->op == OP_CVT && in->nops >= 1) {
            ty = in->sty;
            bits = in->sbits;
        }
        if (!parse_opnd(d, s, (size_t)(p - s), ty, bits, label_ok, &in->o[in->nops])) {
            fail(d, "unsupported PTX operand", s, (size_t)(p - s));
            return;
        }
        if (in->op == OP_SETP || in->op == OP_SHFL) {
            /* `%p|%q`: the second destination goes to slot 5 */
            if (*p == '|') {
                p++;
                const char *s2 = skipws(p);
                while (p < end && *p != ',')
                    p++;
                if (!parse_opnd(d, s2, (size_t)(p - s2), TY_PRED, 1, false, &in->o[5])) {
                    fail(d, "unsupported PTX operand", s2, (size_t)(p - s2));
                    return;
                }
            }
        }
        in->nops++;
        if (p < end && (*p == ',' || *p == '|'))
            p++;
    }
    if (in->space == SP_PARAM && d->addr_space == SP_LOCAL)
        in->space = SP_LOCAL; /* a call's parameter: in the thread's local memory */
    /* the warp operations that wait for the lanes of their membermask
     * (the forms without one, shfl and vote of sm_6x, do not wait) */
    if ((in->op == OP_SHFL && in->nops == 5) || (in->op == OP_VOTE && in->nops == 3) ||
        in->op == OP_MATCH || in->op == OP_REDUX || in->op == OP_WSYNC)
        in->wsync = (uint8_t)in->nops;
    if (skipws(p) < end || !ins_ok(in))
        fail(d, "unsupported PTX instruction", opc, oplen);
}

/* ---- bodies ----------------------------------------------------------------------- */

/* The end of the statement starting at p: its ';' (braces of vector
 * operands included), or end. */
static const char *stmt_end(const char *p, const char *end)
{
    while (p < end && *p != ';')
        p++;
    return p;
}

/* Body text b..e (between the entry's braces). Pass 1: declarations and
 * labels; pass 2: instructions. */
static void decode_body(struct dec *d, const char *b, const char *e)
{
    struct ptx_kernel *k = d->k;
    size_t nins = 0, base = k->nins;
    for (int pass = 1; pass <= 2 && !k->error && !d->oom; pass++) {
        if (pass == 2) {
            struct ptx_ins *ni = sim_realloc(k->ins, (base + nins + 1) * sizeof *k->ins);
            if (!ni) {
                d->oom = true;
                return;
            }
            k->ins = ni;
            memset(ni + base, 0, (nins + 1) * sizeof *ni);
            if (!d->in_func) {
                /* the dynamic shared window starts after every static variable */
                size_t dyn = (d->shared_off + 15) / 16 * 16;
                for (size_t i = 0; i < d->nsyms; i++)
                    if (d->syms[i].dyn_shared)
                        d->syms[i].value = dyn;
                k->shared_static = d->shared_off;
                k->shared_dyn_off = dyn;
            }
        }
        size_t pc = base;
        /* registers are declared in pass 2, scope by scope: a `{ .reg %r1; }`
         * block shadows the outer %r1 only inside it */
        size_t scope[32];
        unsigned depth = 0;
        for (const char *p = b; p < e && !k->error;) {
            p = skipws(p);
            if (p >= e)
                break;
            if (*p == '{') {
                if (depth < 32)
                    scope[depth] = d->nfams;
                depth++;
                p++;
                continue;
            }
            if (*p == '}') {
                if (depth > 0 && --depth < 32)
                    d->nfams = scope[depth];
                p++;
                continue;
            }
            size_t n;
            const char *t = word(p, &n);
            const char *q = skipws(t + n);
            if (n && *t != '.' && *t != '@' && *q == ':') {
                if (pass == 1) {
                    if (!grow((void **)&d->labels, &d->caplabels, d->nlabels,
                              sizeof *d->labels)) {
                        d->oom = true;
                        return;
                    }
                    struct label *lb = &d->labels[d->nlabels++];
                    snprintf(lb->name, sizeof lb->name, "%.*s", (int)n, t);
                    lb->pc = (uint32_t)pc;
                }
                p = q + 1;
                continue;
            }
            const char *se = stmt_end(p, e);
            if (*t == '.') {
                if (pass == 2 && tokeq(t, n, ".reg"))
                    decl_reg(d, p, se);
                if (pass == 1) {
                    if (tokeq(t, n, ".reg")) {
                        /* pass 2 */
                    } else if (tokeq(t, n, ".param")) {
                        /* a call sequence's parameter: thread-local bytes,
                         * one place per name (the largest declared) */
                        const char *nm, *init;
                        size_t nl, sz, al;
                        if (!decl_var(t + n, se, &nm, &nl, &sz, &al, &init) || init) {
                            fail(d, "unsupported declaration", p, (size_t)(se - p));
                        } else {
                            struct sym *s = local_sym(d, nm, nl);
                            if (!s || s->size < sz) {
                                d->local_off = (d->local_off + al - 1) / al * al;
                                if (!s)
                                    s = sym_add(d, nm, nl);
                                if (s) {
                                    s->space = SP_LOCAL;
                                    s->value = d->local_off;
                                    s->size = sz;
                                }
                                d->local_off += sz;
                            }
                        }
                    } else if (d->in_func && tokeq(t, n, ".shared")) {
                        fail(d, "unsupported .shared in a .func", t, n);
                    } else if (tokeq(t, n, ".shared") || tokeq(t, n, ".local")) {
                        const char *nm, *init;
                        size_t nl, sz, al;
                        if (!decl_var(t + n, se, &nm, &nl, &sz, &al, &init) || init) {
                            fail(d, "unsupported declaration", p, (size_t)(se - p));
                        } else {
                            size_t *off = *t == '.' && t[1] == 's' ? &d->shared_off
                                                                    : &d->local_off;
                            *off = (*off + al - 1) / al * al;
                            struct sym *s = sym_add(d, nm, nl);
                            if (s) {
                                s->space = t[1] == 's' ? SP_SHARED : SP_LOCAL;
                                s->value = *off;
                            }
                            *off += sz;
                        }
                    } else if (tokeq(t, n, ".pragma") || tokeq(t, n, ".loc")) {
                        /* hints */
                    } else {
                        fail(d, "unsupported directive", t, n);
                    }
                }
                if (tokeq(t, n, ".loc"))
                    se = p + strcspn(p, "\n"); /* .loc has no ';' */
                p = se + 1;
                continue;
            }
            if (pass == 2)
                decode_ins(d, p, se, &k->ins[pc]);
            pc++;
            p = se + 1;
        }
        nins = pc - base;
    }
    k->nins = k->error ? 0 : base + nins;
    k->local_bytes = d->local_off;
    k->nregs = d->nregs;
}

/* ---- module ---------------------------------------------------------------------- */

/* Parameters of an entry: each name a symbol at its offset (the layout rule
 * of sim_module.c's parser: natural or `.align`, arrays their element's). */
static void decl_params(struct dec *d, const char *p, const char *close)
{
    size_t off = 0;
    while (p < close) {
        const char *comma = memchr(p, ',', (size_t)(close - p));
        const char *e = comma ? comma : close;
        const char *nm, *init;
        size_t nl, sz, al;
        bool arr = memchr(p, '[', (size_t)(e - p)) != NULL;
        if (decl_var(p, e, &nm, &nl, &sz, &al, &init)) {
            const char *a = strstr(p, ".align");
            bool explicit_al = a && a < e;
            /* after .ptr, .align is the pointee's */
            const char *pt = strstr(p, ".ptr");
            if (pt && pt < e && explicit_al && a > pt) {
                uint8_t ty, bits;
                size_t n;
                const char *t = p;
                al = 8;
                for (;;) {
                    t = word(t, &n);
                    if (!n || t >= e)
                        break;
                    if (parse_type(t, n, &ty, &bits))
                        al = bits / 8;
                    t += n;
                }
            }
            (void)arr;
            /* A sub-byte pointee (.pred) or a malformed declaration: byte
             * aligned, never a division by zero. */
            if (al == 0)
                al = 1;
            off = (off + al - 1) / al * al;
            struct sym *s = sym_add(d, nm, nl);
            if (s) {
                s->space = SP_PARAM;
                s->value = off;
            }
            off += sz;
        }
        p = comma ? comma + 1 : close;
    }
}

static const char *match_close(const char *p, char open, char close)
{
    int depth = 0;
    for (; *p; p++) {
        if (*p == open)
            depth++;
        else if (*p == close && --depth == 0)
            return p;
    }
    return NULL;
}

/* Module-scope `.global`/`.const` variable: storage in m->globals, grown
 * as a list of separate blocks is not needed: two passes over the text. */
struct gvar {
    const char *decl, *end;
};

static int module_globals(struct dec *d, struct ptx_module *m, const char *t, bool place)
{
    size_t total = 0;
    for (const char *p = t; *p;) {
        p = skipws(p);
        if (!*p)
            break;
        if (*p == '{') {
            const char *c = match_close(p, '{', '}');
            p = c ? c + 1 : p + strlen(p);
            continue;
        }
        size_t n;
        const char *w = word(p, &n);
        if (!n) {
            p++;
            continue;
        }
        const char *after = w + n;
        if (tokeq(w, n, ".visible") || tokeq(w, n, ".weak") || tokeq(w, n, ".extern")) {
            const char *w2 = word(after, &n);
            if (tokeq(w2, n, ".global") || tokeq(w2, n, ".const") || tokeq(w2, n, ".shared")) {
                w = w2;
                after = w2 + n;
            } else {
                p = after;
                continue;
            }
        }
        bool is_g = tokeq(w, n, ".global"), is_c = tokeq(w, n, ".const"),
             is_s = tokeq(w, n, ".shared");
        if (!is_g && !is_c && !is_s) {
            if (tokeq(w, n, ".entry") || tokeq(w, n, ".func")) {
                /* skip to the body (or the ';' of a prototype) */
                const char *q = after;
                while (*q && *q != '{' && *q != ';')
                    q++;
                p = q;
                continue;
            }
            p = after;
            continue;
        }
        const char *se = strchr(after, ';');
        if (!se)
            return -EINVAL;
        const char *nm, *init;
        size_t nl, sz, al;
        bool ext = w > t && strstr(p, ".extern") && strstr(p, ".extern") < w;
        if (!decl_var(after, se, &nm, &nl, &sz, &al, &init)) {
            p = se + 1;
            continue;
        }
        if (is_s) {
            if (place) {
                struct sym *s = sym_add(d, nm, nl);
                if (s) {
                    s->space = SP_SHARED;
                    if (ext || sz == 0) {
                        s->dyn_shared = true;
                    } else {
                        d->shared_off = (d->shared_off + al - 1) / al * al;
                        s->value = d->shared_off;
                        d->shared_off += sz;
                    }
                }
            }
            p = se + 1;
            continue;
        }
        total = (total + al - 1) / al * al;
        if (place) {
            size_t cap = m->nvars;
            char *vn = sim_strndup(nm, nl);
            if (!vn || !grow((void **)&m->vars, &cap, m->nvars, sizeof *m->vars)) {
                sim_free(vn);
                return -ENOMEM;
            }
            m->vars[m->nvars++] = (struct ptx_gvar){ vn, total, sz };
            struct sym *s = sym_add(d, nm, nl);
            if (s) {
                s->space = is_g ? SP_GLOBAL : SP_CONST;
                s->value = (uint64_t)(uintptr_t)(m->globals + total);
            }
            if (init) {
                /* `= {a, b, ...}` or `= a`: integers or hex floats of the
                 * element type */
                uint8_t ty = TY_U, bits = 8;
                const char *q = after;
                for (;;) {
                    q = word(q, &n);
                    if (!n || q >= se)
                        break;
                    if (parse_type(q, n, &ty, &bits))
                        break;
                    q += n;
                }
                size_t es = bits / 8, i = 0;
                for (const char *v = init; v < se && i * es < sz;) {
                    v = skipws(v);
                    if (*v == '{' || *v == ',' || *v == '}') {
                        v++;
                        continue;
                    }
                    const char *vs = v;
                    while (v < se && *v != ',' && *v != '}' && !isspace((unsigned char)*v))
                        v++;
                    uint64_t val;
                    if (!parse_imm(vs, (size_t)(v - vs), ty, bits, &val))
                        return -EINVAL;
                    memcpy(m->globals + total + i * es, &val, es);
                    i++;
                }
            }
        }
        total += sz;
        p = se + 1;
    }
    return place ? 0 : (int)(total > 0x7fffffff ? -EINVAL : (int)total);
}

static void kernel_free(struct ptx_kernel *k)
{
    sim_free(k->name);
    sim_free(k->ins);
    sim_free(k->calls);
}

/* Every `.func` of the module: name, return and parameter lists, body. */
static int scan_funcs(const char *t, struct func **out, size_t *nout)
{
    struct func *v = NULL;
    size_t n = 0, cap = 0;
    for (const char *p = t; (p = strstr(p, ".func")) != NULL;) {
        bool ok = (p == t || isspace((unsigned char)p[-1])) && isspace((unsigned char)p[5]);
        p += 5;
        if (!ok)
            continue;
        struct func f;
        memset(&f, 0, sizeof f);
        p = skipws(p);
        if (*p == '(') {
            const char *c = match_close(p, '(', ')');
            if (!c)
                break;
            f.ret = p + 1;
            f.ret_end = c;
            p = c + 1;
        }
        f.name = word(p, &f.nlen);
        if (!f.nlen)
            continue;
        p = skipws(f.name + f.nlen);
        if (*p == '(') {
            const char *c = match_close(p, '(', ')');
            if (!c)
                break;
            f.params = p + 1;
            f.params_end = c;
            p = c + 1;
        }
        while (*p && *p != '{' && *p != ';')
            p++;
        if (*p == '{') {
            const char *c = match_close(p, '{', '}');
            if (!c)
                break;
            f.body = p + 1;
            f.body_end = c;
            p = c + 1;
        }
        if (!grow((void **)&v, &cap, n, sizeof *v)) {
            sim_free(v);
            return -ENOMEM;
        }
        v[n++] = f;
    }
    *out = v;
    *nout = n;
    return 0;
}

/* A .func's return and parameter declarations: thread-local bytes. */
static uint32_t func_decls(struct dec *d, const char *p, const char *close, uint32_t *offs,
                           uint32_t *sizes, uint32_t max)
{
    uint32_t k = 0;
    while (p && p < close) {
        const char *comma = memchr(p, ',', (size_t)(close - p));
        const char *e = comma ? comma : close;
        const char *nm, *init;
        size_t nl, sz, al;
        if (decl_var(p, e, &nm, &nl, &sz, &al, &init) && k < max) {
            d->local_off = (d->local_off + al - 1) / al * al;
            struct sym *s = sym_add(d, nm, nl);
            if (s) {
                s->space = SP_LOCAL;
                s->value = d->local_off;
                s->size = sz;
            }
            offs[k] = (uint32_t)d->local_off;
            sizes[k++] = (uint32_t)sz;
            d->local_off += sz;
        } else if (k >= max) {
            fail(d, "too many parameters in a .func", p, (size_t)(e - p));
        }
        p = comma ? comma + 1 : close;
    }
    return k;
}

/* The module's functions, appended after the kernel's instructions, and
 * its call sites pointed at them. Each function gets registers and local
 * bytes of its own (no recursion: checked when it runs). */
static void decode_funcs(struct dec *d)
{
    struct ptx_kernel *k = d->k;
    for (size_t i = 0; i < d->nfuncs && !k->error && !d->oom; i++) {
        struct func *f = &d->funcs[i];
        if (!f->body)
            continue;
        d->nfams = 0;
        d->nsyms = d->nsyms_module;
        d->nlabels = 0;
        d->in_func = true;
        f->start = (uint32_t)k->nins;
        uint32_t rs[1];
        f->rsize = 0;
        if (f->ret && func_decls(d, f->ret, f->ret_end, &f->roff, rs, 1) == 1)
            f->rsize = rs[0];
        f->nparams = f->params ? func_decls(d, f->params, f->params_end, f->poff, f->psize,
                                            PTX_MAX_ARGS)
                               : 0;
        decode_body(d, f->body, f->body_end);
    }
    for (size_t i = 0; i < k->ncalls && !k->error; i++) {
        struct ptx_call *c = &k->calls[i];
        const struct func *f = &d->funcs[c->func];
        if (!f->body) {
            /* vprintf(fmt, args), as nvcc declares it: device printf */
            if (tokeq(f->name, f->nlen, "vprintf") && c->nargs == 2 && c->size[0] == 8 &&
                c->size[1] == 8 && (!c->ret_size || c->ret_size == 4)) {
                c->builtin = PTX_BI_VPRINTF;
                continue;
            }
            /* what nvcc declares for the device runtime's
             * cudaGraphSetConditional(handle, value): no return value */
            if (tokeq(f->name, f->nlen, "cudaGraphSetConditional") && c->nargs == 2 &&
                c->size[0] == 8 && c->size[1] == 4 && !c->ret_size) {
                c->builtin = PTX_BI_SETCOND;
                continue;
            }
            fail(d, "unsupported call of an external function", f->name, f->nlen);
            break;
        }
        if (c->nargs != f->nparams || (c->ret_size && !f->rsize)) {
            fail(d, "call with a mismatched signature:", f->name, f->nlen);
            break;
        }
        c->target = f->start;
        for (uint32_t a = 0; a < c->nargs; a++) {
            c->dst[a] = f->poff[a];
            if (c->size[a] > f->psize[a])
                c->size[a] = f->psize[a];
        }
        c->ret_from = f->roff;
        if (c->ret_size > f->rsize)
            c->ret_size = f->rsize;
    }
    d->in_func = false;
}

static void module_free(struct ptx_module *m)
{
    for (size_t i = 0; i < m->nkernels; i++)
        kernel_free(&m->kernels[i]);
    sim_free(m->kernels);
    sim_free(m->globals);
    for (size_t i = 0; i < m->nvars; i++)
        sim_free(m->vars[i].name);
    sim_free(m->vars);
    sim_free(m);
}

int ptx_module_global(const struct ptx_module *m, const char *name, void **addr, size_t *size)
{
    for (size_t i = 0; m && i < m->nvars; i++)
        if (strcmp(m->vars[i].name, name) == 0) {
            *addr = m->globals + m->vars[i].off;
            *size = m->vars[i].size;
            return 0;
        }
    return -ENOENT;
}

void ptx_module_storage(const struct ptx_module *m, void **base, size_t *size)
{
    bool any = m && m->globals_size;
    *base = any ? m->globals : NULL;
    *size = any ? m->globals_size : 0;
}

int ptx_module_load(const char *text, struct ptx_module **out)
{
    char *t = sim_strip_comments(text);
    if (!t)
        return -ENOMEM;
    struct ptx_module *m = sim_calloc(1, sizeof *m);
    struct dec d;
    memset(&d, 0, sizeof d);
    int r = 0;
    if (!m) {
        r = -ENOMEM;
        goto out;
    }
    atomic_init(&m->refs, 1);
    int gsize = module_globals(&d, m, t, false);
    if (gsize < 0) {
        r = gsize;
        goto out;
    }
    m->globals_size = (size_t)gsize;
    m->globals = sim_calloc(gsize ? (size_t)gsize : 1, 1);
    if (!m->globals || module_globals(&d, m, t, true) < 0) {
        r = m->globals ? -EINVAL : -ENOMEM;
        goto out;
    }
    d.nsyms_module = d.nsyms;
    size_t module_shared = d.shared_off;
    if (scan_funcs(t, &d.funcs, &d.nfuncs) != 0) {
        r = -ENOMEM;
        goto out;
    }
    size_t cap = 0;
    for (const char *p = t; (p = strstr(p, ".entry")) != NULL;) {
        bool start_ok = p == t || isspace((unsigned char)p[-1]);
        p += 6;
        if (!start_ok || !isspace((unsigned char)*p))
            continue;
        size_t n;
        const char *nm = word(p, &n);
        p = nm + n;
        if (!n)
            break;
        if (!grow((void **)&m->kernels, &cap, m->nkernels, sizeof *m->kernels)) {
            r = -ENOMEM;
            goto out;
        }
        struct ptx_kernel *k = &m->kernels[m->nkernels++];
        memset(k, 0, sizeof *k);
        k->mod = m;
        k->name = sim_strndup(nm, n);
        if (!k->name) {
            r = -ENOMEM;
            goto out;
        }
        /* per-entry state: module symbols kept, registers and labels new */
        d.k = k;
        d.capcalls = 0;
        d.nsyms = d.nsyms_module;
        d.nfams = d.nregs = 0;
        d.nlabels = 0;
        d.shared_off = module_shared;
        d.local_off = 0;
        p = skipws(p);
        if (*p == '(') {
            const char *close = strchr(p, ')');
            if (!close) {
                fail(&d, "bad parameter list of", nm, n);
                continue;
            }
            decl_params(&d, p + 1, close);
            p = close + 1;
        }
        while (*p && *p != '{' && *p != ';')
            p++; /* performance directives (.maxntid ...) */
        if (*p != '{') {
            fail(&d, "no body for", nm, n);
            continue;
        }
        const char *close = match_close(p, '{', '}');
        if (!close) {
            fail(&d, "unterminated body of", nm, n);
            break;
        }
        decode_body(&d, p + 1, close);
        if (k->ncalls && !k->error)
            decode_funcs(&d);
        if (k->error)
            k->nins = 0;
        else
            ptx_prepare(k);
        if (d.oom) {
            r = -ENOMEM;
            goto out;
        }
        p = close + 1;
    }
out:
    sim_free(d.funcs);
    sim_free(d.fams);
    sim_free(d.syms);
    sim_free(d.labels);
    sim_free(t);
    if (r) {
        if (m)
            module_free(m);
        return r;
    }
    *out = m;
    return 0;
}

void ptx_module_unref(struct ptx_module *m)
{
    if (m && atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) == 1)
        module_free(m);
}

void ptx_kernel_ref(struct ptx_kernel *k)
{
    if (k)
        atomic_fetch_add_explicit(&k->mod->refs, 1, memory_order_relaxed);
}

void ptx_kernel_unref(struct ptx_kernel *k)
{
    if (k)
        ptx_module_unref(k->mod);
}

struct ptx_kernel *ptx_module_kernel(struct ptx_module *m, const char *name)
{
    for (size_t i = 0; m && i < m->nkernels; i++)
        if (strcmp(m->kernels[i].name, name) == 0)
            return &m->kernels[i];
    return NULL;
}

const char *ptx_kernel_error(const struct ptx_kernel *k)
{
    return k->error ? k->errbuf : NULL;
}

const char *ptx_kernel_name(const struct ptx_kernel *k)
{
    return k->name;
}

size_t ptx_kernel_static_shared(const struct ptx_kernel *k)
{
    return k->shared_static;
}
