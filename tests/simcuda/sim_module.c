/*
 * simcuda modules: PTX text is parsed for its `.entry` declarations; each
 * entry's parameter layout comes from its `.param` list, and entries with a
 * host implementation (the standard kernels) can be launched.
 */
#include "sim.h"
#include "ptx.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sim_module {
    struct ptx_module *ptx; /* the decoded text (one reference), or NULL */
    size_t nfuncs;
    struct sim_func **funcs;
    struct sim_func **kerns; /* libraries: the CUkernel of each entry */
    bool library;
};

/* Function records are never freed: an unload pushes them on a free list
 * that a later load pops (LIFO), so a new function may get the handle value
 * of an unloaded one, as a real driver may. */
static pthread_mutex_t g_func_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sim_func *g_free_funcs;

static struct sim_func *func_rec_get(void)
{
    pthread_mutex_lock(&g_func_mu);
    struct sim_func *f = g_free_funcs;
    if (f)
        g_free_funcs = f->next_free;
    pthread_mutex_unlock(&g_func_mu);
    if (!f)
        f = sim_malloc(sizeof *f);
    if (f)
        memset(f, 0, sizeof *f);
    return f;
}

static void func_rec_put(struct sim_func *f)
{
    pthread_mutex_lock(&g_func_mu);
    f->next_free = g_free_funcs;
    g_free_funcs = f;
    pthread_mutex_unlock(&g_func_mu);
}

/* ---- PTX parsing ------------------------------------------------------------ */


static size_t type_size(const char *t, size_t len)
{
    static const struct {
        const char *name;
        size_t size;
    } types[] = {
        {".b8", 1},   {".u8", 1},   {".s8", 1},     {".b16", 2},   {".u16", 2},
        {".s16", 2},  {".f16", 2},  {".bf16", 2},   {".b32", 4},   {".u32", 4},
        {".s32", 4},  {".f32", 4},  {".f16x2", 4},  {".bf16x2", 4}, {".b64", 8},
        {".u64", 8},  {".s64", 8},  {".f64", 8},    {".b128", 16},
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (strlen(types[i].name) == len && memcmp(types[i].name, t, len) == 0)
            return types[i].size;
    return 0;
}

static bool is_tok(const char *t, size_t len, const char *lit)
{
    return strlen(lit) == len && memcmp(t, lit, len) == 0;
}

/* Parse one ".param ..." declaration: size and alignment. */
static bool parse_param(const char *s, const char *e, size_t *size, size_t *align)
{
    size_t elem = 0, vec = 1, count = 1, al = 0;
    bool ptr = false, saw_param = false, saw_name = false, is_array = false;
    while (s < e) {
        while (s < e && isspace((unsigned char)*s))
            s++;
        if (s >= e)
            break;
        const char *t = s;
        if (*s == '[') {
            while (s < e && *s != ']')
                s++;
            if (s < e)
                s++;
        } else {
            while (s < e && !isspace((unsigned char)*s) && *s != '[')
                s++;
        }
        size_t len = (size_t)(s - t);
        if (*t == '[') {
            char *endp;
            unsigned long long m = strtoull(t + 1, &endp, 10);
            if (endp == t + 1 || m == 0)
                return false;
            count *= (size_t)m;
            is_array = true;
        } else if (is_tok(t, len, ".param")) {
            saw_param = true;
        } else if (is_tok(t, len, ".align")) {
            while (s < e && isspace((unsigned char)*s))
                s++;
            char *endp;
            unsigned long long a = strtoull(s, &endp, 10);
            if (endp == s || a == 0 || (a & (a - 1)))
                return false;
            s = endp;
            if (!ptr)
                al = (size_t)a; /* after .ptr, .align is the pointee's */
        } else if (is_tok(t, len, ".ptr")) {
            ptr = true;
        } else if (is_tok(t, len, ".v2")) {
            vec = 2;
        } else if (is_tok(t, len, ".v4")) {
            vec = 4;
        } else if (*t == '.') {
            size_t ts = type_size(t, len);
            if (ts)
                elem = ts; /* else a state space (.global, ...) */
        } else {
            saw_name = true;
        }
    }
    if (!saw_param || !saw_name || !elem)
        return false;
    *size = elem * vec * count;
    size_t natural = elem * vec;
    if (is_array)
        *align = al ? al : elem;
    else
        *align = al > natural ? al : natural;
    return true;
}

static void free_entries(struct sim_ptx_entry *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        sim_free(v[i].name);
        sim_free(v[i].offsets);
        sim_free(v[i].sizes);
    }
    sim_free(v);
}

static bool ident_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '$' || c == '.' || c == '%';
}

/* Parse every `.entry NAME ( params )` of a PTX text. */
static CUresult ptx_parse(const char *text, struct sim_ptx_entry **out, size_t *nout)
{
    char *t = sim_strip_comments(text);
    if (!t)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct sim_ptx_entry *v = NULL;
    size_t n = 0, cap = 0;
    CUresult r = CUDA_SUCCESS;
    const char *p = t;
    while ((p = strstr(p, ".entry")) != NULL) {
        bool start_ok = p == t || isspace((unsigned char)p[-1]);
        p += 6;
        if (!start_ok || !isspace((unsigned char)*p))
            continue;
        while (isspace((unsigned char)*p))
            p++;
        const char *name = p;
        while (*p && ident_char(*p))
            p++;
        size_t nlen = (size_t)(p - name);
        if (!nlen) {
            r = CUDA_ERROR_INVALID_PTX;
            break;
        }
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 8;
            struct sim_ptx_entry *nv = sim_realloc(v, nc * sizeof *nv);
            if (!nv) {
                r = CUDA_ERROR_OUT_OF_MEMORY;
                break;
            }
            v = nv;
            cap = nc;
        }
        struct sim_ptx_entry *en = &v[n++];
        memset(en, 0, sizeof *en);
        en->name = sim_strndup(name, nlen);
        if (!en->name) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
            break;
        }
        while (isspace((unsigned char)*p))
            p++;
        if (*p != '(')
            continue; /* no parameter list */
        const char *close = strchr(p, ')');
        if (!close) {
            r = CUDA_ERROR_INVALID_PTX;
            break;
        }
        const char *s = p + 1;
        size_t pcap = 0, off = 0;
        while (s < close) {
            const char *comma = memchr(s, ',', (size_t)(close - s));
            const char *e = comma ? comma : close;
            bool blank = true;
            for (const char *q = s; q < e; q++)
                blank = blank && isspace((unsigned char)*q);
            if (blank && !comma)
                break; /* "()" */
            size_t sz, al;
            if (blank || !parse_param(s, e, &sz, &al)) {
                r = CUDA_ERROR_INVALID_PTX;
                break;
            }
            if (en->nparams == pcap) {
                size_t nc = pcap ? pcap * 2 : 8;
                size_t *no = sim_realloc(en->offsets, nc * sizeof *no);
                if (no)
                    en->offsets = no;
                size_t *ns = sim_realloc(en->sizes, nc * sizeof *ns);
                if (ns)
                    en->sizes = ns;
                if (!no || !ns) {
                    r = CUDA_ERROR_OUT_OF_MEMORY;
                    break;
                }
                pcap = nc;
            }
            off = (off + al - 1) / al * al; /* each parameter at its alignment */
            en->offsets[en->nparams] = off;
            en->sizes[en->nparams] = sz;
            en->nparams++;
            off += sz;
            s = comma ? comma + 1 : close;
        }
        en->argsize = off;
        if (r)
            break;
        p = close + 1;
    }
    sim_free(t);
    if (r) {
        free_entries(v, n);
        return r;
    }
    *out = v;
    *nout = n;
    return CUDA_SUCCESS;
}

/* ---- modules ------------------------------------------------------------------- */

static bool layout_matches(const struct sim_ptx_entry *e, const struct sim_kernel_impl *k)
{
    if (e->nparams != k->nparams)
        return false;
    for (size_t i = 0; i < e->nparams; i++)
        if (e->offsets[i] != k->offsets[i] || e->sizes[i] != k->sizes[i])
            return false;
    return true;
}

static void module_free(struct sim_module *m)
{
    /* pushed last to first, so a reload pops them in the same order */
    for (size_t i = m->nfuncs; i-- > 0;) {
        if (m->kerns && m->kerns[i]) {
            sim_reg_del(m->kerns[i]);
            func_rec_put(m->kerns[i]);
        }
    }
    for (size_t i = m->nfuncs; i-- > 0;) {
        struct sim_func *f = m->funcs[i];
        if (!f)
            continue;
        sim_reg_del(f);
        sim_free(f->name);
        sim_free(f->offsets);
        sim_free(f->sizes);
        func_rec_put(f);
    }
    sim_free(m->funcs);
    sim_free(m->kerns);
    void *gbase;
    size_t gsize;
    ptx_module_storage(m->ptx, &gbase, &gsize);
    if (gbase)
        sim_mem_del_module((uintptr_t)gbase);
    ptx_module_unref(m->ptx);
    sim_free(m);
}

static CUresult module_load(CUmodule *out, const void *image, bool library, struct sim_ctx *ctx)
{
    if (!out || !image)
        return CUDA_ERROR_INVALID_VALUE;
    const unsigned char *b = image;
    if ((b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F') ||
        (b[0] == 0xb1 && b[1] == 0x43 && b[2] == 0x62 && b[3] == 0x46) ||
        (b[0] == 0x50 && b[1] == 0xed && b[2] == 0x55 && b[3] == 0xba))
        return CUDA_ERROR_INVALID_IMAGE; /* cubin/fatbin: simcuda runs PTX only */
    const char *text = image;
    if (!strstr(text, ".entry") && !strstr(text, ".version"))
        return CUDA_ERROR_INVALID_IMAGE;
    struct sim_ptx_entry *ents;
    size_t n;
    CUresult r;
    if ((r = ptx_parse(text, &ents, &n)) != CUDA_SUCCESS)
        return r;
    struct ptx_module *pm = NULL;
    int pr = ptx_module_load(text, &pm);
    if (pr == -ENOMEM) {
        free_entries(ents, n);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    struct sim_module *m = sim_calloc(1, sizeof *m);
    if (m) {
        m->ptx = pm; /* NULL when undecodable: only host versions run */
        m->library = library;
        m->funcs = sim_calloc(n ? n : 1, sizeof *m->funcs);
        m->kerns = library ? sim_calloc(n ? n : 1, sizeof *m->kerns) : NULL;
    }
    bool ok = m && m->funcs && (!library || m->kerns);
    for (size_t i = 0; ok && i < n; i++) {
        struct sim_func *f = func_rec_get();
        if (!f) {
            ok = false;
            break;
        }
        f->mod = m;
        f->name = ents[i].name;
        f->nparams = ents[i].nparams;
        f->offsets = ents[i].offsets;
        f->sizes = ents[i].sizes;
        f->argsize = ents[i].argsize;
        const struct sim_kernel_impl *k = sim_kernel_find(f->name);
        /* a same-named kernel with another signature has no host version */
        f->impl = k && layout_matches(&ents[i], k) ? k : NULL;
        f->fn = f->impl ? k->fn : NULL;
        f->pk = ptx_module_kernel(pm, f->name);
        ents[i].name = NULL;
        ents[i].offsets = ents[i].sizes = NULL;
        m->funcs[i] = f;
        m->nfuncs = i + 1;
        if (library) {
            struct sim_func *kr = func_rec_get();
            if (!kr) {
                ok = false;
                break;
            }
            kr->mod = m;
            kr->target = f;
            m->kerns[i] = kr;
        }
    }
    free_entries(ents, n); /* what moved into the functions is NULL here */
    if (!ok) {
        if (m && m->funcs)
            module_free(m);
        else if (m)
            sim_free(m);
        if (!m || !m->funcs)
            ptx_module_unref(pm);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (size_t i = 0; i < n; i++) {
        sim_reg_add(m->funcs[i], SIM_T_FUNC);
        if (library)
            sim_reg_add(m->kerns[i], SIM_T_KERNEL);
    }
    /* Its variables are device memory while it is loaded (cuModuleGetGlobal). */
    void *gbase;
    size_t gsize;
    ptx_module_storage(pm, &gbase, &gsize);
    if (gbase)
        sim_mem_add_module((uintptr_t)gbase, gsize, ctx);
    sim_reg_add(m, SIM_T_MODULE);
    *out = (CUmodule)m;
    return CUDA_SUCCESS;
}

static CUresult ctx_module_load(CUmodule *out, const void *image)
{
    SIM_CHECK_INIT();
    struct sim_ctx *c;
    CUresult r = sim_ctx_need(&c);
    if (r)
        return r;
    sim_print_flush(c); /* module loads and unloads flush device printf */
    return module_load(out, image, false, c);
}

CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    SIM_ENTER(cuModuleLoadData);
    return ctx_module_load(module, image);
}

CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                            CUjit_option *options, void **optionValues)
{
    SIM_ENTER(cuModuleLoadDataEx);
    if (numOptions && (!options || !optionValues))
        return CUDA_ERROR_INVALID_VALUE;
    return ctx_module_load(module, image); /* JIT options have no effect here */
}

CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
    SIM_ENTER(cuModuleLoad);
    SIM_CHECK_INIT();
    if (!module || !fname)
        return CUDA_ERROR_INVALID_VALUE;
    FILE *f = fopen(fname, "rb");
    if (!f)
        return CUDA_ERROR_FILE_NOT_FOUND;
    size_t cap = 1 << 16, n = 0;
    char *buf = sim_malloc(cap);
    while (buf) {
        if (n + 1 >= cap) {
            char *nb = sim_realloc(buf, cap * 2);
            if (!nb) {
                sim_free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
    }
    fclose(f);
    if (!buf)
        return CUDA_ERROR_OUT_OF_MEMORY;
    buf[n] = 0;
    CUresult r = ctx_module_load(module, buf);
    sim_free(buf);
    return r;
}

CUresult cuModuleUnload(CUmodule hmod)
{
    SIM_ENTER(cuModuleUnload);
    SIM_CHECK_INIT();
    struct sim_module *m = (struct sim_module *)hmod;
    if (!sim_reg_has(m, SIM_T_MODULE) || m->library)
        return CUDA_ERROR_INVALID_HANDLE; /* a library's module goes with the library */
    sim_reg_del(m);
    sim_print_flush(sim_ctx_current());
    /* Queued launches and executable graphs hold copies of what they need. */
    module_free(m);
    return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    SIM_ENTER(cuModuleGetFunction);
    SIM_CHECK_INIT();
    if (!hfunc || !name)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_module *m = (struct sim_module *)hmod;
    if (!sim_reg_has(m, SIM_T_MODULE))
        return CUDA_ERROR_INVALID_HANDLE;
    for (size_t i = 0; i < m->nfuncs; i++) {
        if (strcmp(m->funcs[i]->name, name) != 0)
            continue;
        if (!m->funcs[i]->fn && !m->funcs[i]->pk)
            return CUDA_ERROR_NOT_FOUND; /* neither a host version nor its PTX */
        *hfunc = (CUfunction)m->funcs[i];
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_NOT_FOUND;
}

/* A module-scope .global or .const variable of m (`__device__`,
 * `__constant__`): its address and size. Documented: one of dptr and bytes
 * (not both) may be NULL. */
static CUresult module_global(CUdeviceptr *dptr, size_t *bytes, struct sim_module *m,
                              const char *name)
{
    if ((!dptr && !bytes) || !name)
        return CUDA_ERROR_INVALID_VALUE;
    void *addr;
    size_t size;
    if (ptx_module_global(m->ptx, name, &addr, &size) != 0)
        return CUDA_ERROR_NOT_FOUND;
    if (dptr)
        *dptr = (CUdeviceptr)(uintptr_t)addr;
    if (bytes)
        *bytes = size;
    return CUDA_SUCCESS;
}

CUresult cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name)
{
    SIM_ENTER(cuModuleGetGlobal_v2);
    SIM_CHECK_INIT();
    struct sim_ctx *c;
    CUresult r = sim_ctx_need(&c);
    if (r)
        return r;
    struct sim_module *m = (struct sim_module *)hmod;
    if (!sim_reg_has(m, SIM_T_MODULE))
        return CUDA_ERROR_INVALID_HANDLE;
    return module_global(dptr, bytes, m, name);
}

/* A CUkernel may stand for a CUfunction (cuLaunchKernel, kernel nodes). */
CUresult sim_func_get(CUfunction h, struct sim_func **out)
{
    struct sim_func *f = (struct sim_func *)h;
    if (sim_reg_has(f, SIM_T_KERNEL))
        f = f->target;
    else if (!sim_reg_has(f, SIM_T_FUNC))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!f->fn && !f->pk)
        return CUDA_ERROR_INVALID_HANDLE;
    *out = f;
    return CUDA_SUCCESS;
}

CUresult sim_func_plan(const struct sim_func *f, unsigned shmem, sim_kernel_fn *fn,
                       struct ptx_kernel **pk)
{
    *fn = NULL;
    *pk = NULL;
    if (f->fn && (!sim_knob.kernels_ptx || !f->pk)) {
        *fn = f->fn;
        return CUDA_SUCCESS;
    }
    const char *why = ptx_kernel_error(f->pk);
    if (why) {
        fprintf(stderr, "simcuda: kernel %s cannot run: %s\n", f->name, why);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (ptx_kernel_static_shared(f->pk) + shmem > SIM_MAX_SHARED_PER_BLOCK)
        return CUDA_ERROR_INVALID_VALUE;
    ptx_kernel_ref(f->pk);
    *pk = f->pk;
    return CUDA_SUCCESS;
}

CUresult cuFuncGetModule(CUmodule *hmod, CUfunction hfunc)
{
    SIM_ENTER(cuFuncGetModule);
    SIM_CHECK_INIT();
    if (!hmod)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_func *f = (struct sim_func *)hfunc;
    if (!sim_reg_has(f, SIM_T_FUNC))
        return CUDA_ERROR_INVALID_HANDLE;
    *hmod = (CUmodule)f->mod;
    return CUDA_SUCCESS;
}

/* ---- libraries (context-independent modules) ------------------------------------- */

/* Assumption: a library is loaded once for all contexts; its CUkernel's
 * CUfunction is the same handle in every context. */
CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                           void **jitOptionsValues, unsigned int numJitOptions,
                           CUlibraryOption *libraryOptions, void **libraryOptionValues,
                           unsigned int numLibraryOptions)
{
    SIM_ENTER(cuLibraryLoadData);
    SIM_CHECK_INIT();
    if ((numJitOptions && (!jitOptions || !jitOptionsValues)) ||
        (numLibraryOptions && (!libraryOptions || !libraryOptionValues)))
        return CUDA_ERROR_INVALID_VALUE;
    /* Assumption: its variables are memory of the current context's device
     * (device 0 without one). */
    return module_load((CUmodule *)library, code, true, sim_ctx_current());
}

static struct sim_module *library_get(CUlibrary h)
{
    struct sim_module *m = (struct sim_module *)h;
    return sim_reg_has(m, SIM_T_MODULE) && m->library ? m : NULL;
}

CUresult cuLibraryUnload(CUlibrary library)
{
    SIM_ENTER(cuLibraryUnload);
    SIM_CHECK_INIT();
    struct sim_module *m = library_get(library);
    if (!m)
        return CUDA_ERROR_INVALID_HANDLE;
    sim_reg_del(m);
    module_free(m);
    return CUDA_SUCCESS;
}

CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
    SIM_ENTER(cuLibraryGetKernel);
    SIM_CHECK_INIT();
    if (!pKernel || !name)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_module *m = library_get(library);
    if (!m)
        return CUDA_ERROR_INVALID_HANDLE;
    for (size_t i = 0; i < m->nfuncs; i++) {
        if (strcmp(m->funcs[i]->name, name) != 0)
            continue;
        if (!m->funcs[i]->fn && !m->funcs[i]->pk)
            return CUDA_ERROR_NOT_FOUND; /* neither a host version nor its PTX */
        *pKernel = (CUkernel)m->kerns[i];
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_NOT_FOUND;
}

CUresult cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary library, const char *name)
{
    SIM_ENTER(cuLibraryGetGlobal);
    SIM_CHECK_INIT();
    struct sim_ctx *c;
    CUresult r = sim_ctx_need(&c);
    if (r)
        return r;
    struct sim_module *m = library_get(library);
    if (!m)
        return CUDA_ERROR_INVALID_HANDLE;
    return module_global(dptr, bytes, m, name);
}

static struct sim_func *kernel_get(CUkernel h)
{
    struct sim_func *k = (struct sim_func *)h;
    return sim_reg_has(k, SIM_T_KERNEL) ? k : NULL;
}

CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
    SIM_ENTER(cuKernelGetFunction);
    SIM_CHECK_INIT();
    struct sim_ctx *c;
    CUresult r = sim_ctx_need(&c);
    if (r)
        return r;
    if (!pFunc)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_func *k = kernel_get(kernel);
    if (!k)
        return CUDA_ERROR_INVALID_HANDLE;
    *pFunc = (CUfunction)k->target;
    return CUDA_SUCCESS;
}

CUresult cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset,
                              size_t *paramSize)
{
    SIM_ENTER(cuKernelGetParamInfo);
    SIM_CHECK_INIT();
    struct sim_func *k = kernel_get(kernel);
    if (!k || !paramOffset || paramIndex >= k->target->nparams)
        return CUDA_ERROR_INVALID_VALUE;
    *paramOffset = k->target->offsets[paramIndex];
    if (paramSize)
        *paramSize = k->target->sizes[paramIndex];
    return CUDA_SUCCESS;
}

CUresult cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset,
                            size_t *paramSize)
{
    SIM_ENTER(cuFuncGetParamInfo);
    SIM_CHECK_INIT();
    struct sim_func *f;
    if (sim_func_get(func, &f) != CUDA_SUCCESS || !paramOffset || paramIndex >= f->nparams)
        return CUDA_ERROR_INVALID_VALUE;
    *paramOffset = f->offsets[paramIndex];
    if (paramSize)
        *paramSize = f->sizes[paramIndex];
    return CUDA_SUCCESS;
}

CUresult cuFuncGetName(const char **name, CUfunction hfunc)
{
    SIM_ENTER(cuFuncGetName);
    SIM_CHECK_INIT();
    struct sim_func *f;
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_func_get(hfunc, &f) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_HANDLE;
    *name = f->name;
    return CUDA_SUCCESS;
}

/* ---- launches ---------------------------------------------------------------- */

CUresult sim_check_dims(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shmem)
{
    if (!gx || !gy || !gz || !bx || !by || !bz)
        return CUDA_ERROR_INVALID_VALUE;
    if (gx > 2147483647u || gy > 65535u || gz > 65535u)
        return CUDA_ERROR_INVALID_VALUE;
    if (bx > 1024u || by > 1024u || bz > 64u ||
        (unsigned long long)bx * by * bz > SIM_MAX_THREADS_PER_BLOCK)
        return CUDA_ERROR_INVALID_VALUE;
    if (shmem > SIM_MAX_SHARED_PER_BLOCK)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

CUresult sim_pack_args(const struct sim_func *f, void **kernelParams, void **extra,
                       unsigned char *dst)
{
    if (kernelParams && extra)
        return CUDA_ERROR_INVALID_VALUE; /* documented */
    if (f->nparams == 0)
        return CUDA_SUCCESS;
    if (kernelParams) {
        /* Padding between parameters is nobody's: zero, so the access check
         * (every aligned word) never reads bytes no one wrote. */
        memset(dst, 0, f->argsize);
        for (size_t i = 0; i < f->nparams; i++) {
            if (!kernelParams[i])
                return CUDA_ERROR_INVALID_VALUE;
            memcpy(dst + f->offsets[i], kernelParams[i], f->sizes[i]);
        }
        return CUDA_SUCCESS;
    }
    if (!extra)
        return CUDA_ERROR_INVALID_VALUE;
    const void *buf = NULL;
    const size_t *size = NULL;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
            buf = extra[i + 1];
        else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
            size = extra[i + 1];
        else
            return CUDA_ERROR_INVALID_VALUE;
    }
    if (!buf || !size || *size < f->argsize)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(dst, buf, f->argsize);
    return CUDA_SUCCESS;
}

static CUresult launch(CUfunction hf, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, unsigned shmem, CUstream hs, void **kp,
                       void **extra, bool pt, const struct sim_kattrs *attrs)
{
    SIM_CHECK_INIT();
    struct sim_func *f;
    struct sim_stream *s;
    CUresult r = sim_func_get(hf, &f);
    if (r)
        return r;
    if ((r = sim_check_dims(gx, gy, gz, bx, by, bz, shmem)) != CUDA_SUCCESS)
        return r;
    if (kp && extra)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = sim_stream_resolve(hs, pt, &s)) != CUDA_SUCCESS)
        return r;
    if (sim_capture_active(s)) {
        CUDA_KERNEL_NODE_PARAMS p = {0};
        p.func = hf;
        p.gridDimX = gx;
        p.gridDimY = gy;
        p.gridDimZ = gz;
        p.blockDimX = bx;
        p.blockDimY = by;
        p.blockDimZ = bz;
        p.sharedMemBytes = shmem;
        p.kernelParams = kp;
        p.extra = extra;
        return sim_capture_add_kernel(s, &p, attrs);
    }
    if ((r = sim_capture_check_legacy(s)) != CUDA_SUCCESS)
        return r;
    sim_kernel_fn fn;
    struct ptx_kernel *pk;
    if ((r = sim_func_plan(f, shmem, &fn, &pk)) != CUDA_SUCCESS)
        return r;
    struct sim_op *op = sim_op_new(SIM_OP_KERNELS, sizeof(struct sim_kcall) + f->argsize);
    if (!op) {
        ptx_kernel_unref(pk);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    struct sim_kcall *call = (struct sim_kcall *)(op + 1);
    unsigned char *args = (unsigned char *)(call + 1);
    memset(call, 0, sizeof *call + f->argsize); /* one call: the padding too */
    /* arguments are copied now: the caller may reuse its buffers */
    if ((r = sim_pack_args(f, kp, extra, args)) != CUDA_SUCCESS) {
        sim_op_free(op);
        ptx_kernel_unref(pk);
        return r;
    }
    call->fn = fn;
    call->pk = pk;
    call->name = pk ? ptx_kernel_name(pk) : NULL; /* f's name goes with an unload */
    call->dims[0] = gx;
    call->dims[1] = gy;
    call->dims[2] = gz;
    call->dims[3] = bx;
    call->dims[4] = by;
    call->dims[5] = bz;
    call->shmem = shmem;
    call->args = args;
    call->impl = f->impl;
    call->argsize = f->argsize;
    op->u.k.ncalls = 1;
    op->u.k.calls = call;
    op->u.k.ctx = s->ctx; /* the stream's context: its device runs the kernel */
    sim_stream_submit(s, op, NULL, 0);
    return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                        unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                        void **kernelParams, void **extra)
{
    SIM_ENTER(cuLaunchKernel);
    return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                  sharedMemBytes, hStream, kernelParams, extra, false, NULL);
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                             unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                             unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                             void **kernelParams, void **extra)
{
    SIM_ENTER(cuLaunchKernel_ptsz);
    return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                  sharedMemBytes, hStream, kernelParams, extra, true, NULL);
}

/* cuLaunchKernelEx: cuLaunchKernel with the shape and stream in a config
 * and a list of launch attributes. simcuda models two attributes, priority
 * and cooperative (a later one of the same id overrides an earlier one,
 * assumption), which do not change how a kernel runs; any other id is
 * CUDA_ERROR_NOT_SUPPORTED (a simcuda limit). Captured, the node keeps them
 * (cuGraphKernelNodeGetAttribute). */
static CUresult launch_ex(const CUlaunchConfig *c, CUfunction f, void **kp, void **extra, bool pt)
{
    SIM_CHECK_INIT();
    if (!c || (c->numAttrs && !c->attrs))
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_kattrs a = {0};
    for (unsigned i = 0; i < c->numAttrs; i++) {
        if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_PRIORITY)
            a.priority = c->attrs[i].value.priority;
        else if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE)
            a.cooperative = c->attrs[i].value.cooperative;
        else
            return CUDA_ERROR_NOT_SUPPORTED;
    }
    return launch(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY,
                  c->blockDimZ, c->sharedMemBytes, c->hStream, kp, extra, pt,
                  c->numAttrs ? &a : NULL);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                          void **extra)
{
    SIM_ENTER(cuLaunchKernelEx);
    return launch_ex(config, f, kernelParams, extra, false);
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                               void **extra)
{
    SIM_ENTER(cuLaunchKernelEx_ptsz);
    return launch_ex(config, f, kernelParams, extra, true);
}
