/*
 * Conditional graph nodes on simcuda (issue 32 item 4): handles, IF (with
 * its optional else body), WHILE and SWITCH, values set from device code
 * through cudaGraphSetConditional (the PTX call nvcc emits for it), the
 * capture APIs that build bodies, and the rules cuda.h states. Expected
 * values come from cuda.h's text (CUgraphConditionalNodeType,
 * CUDA_CONDITIONAL_NODE_PARAMS, cuGraphConditionalHandleCreate).
 */
#include <criterion/criterion.h>

#include <cuda.h>
#include <stdint.h>
#include <string.h>

#include "sim_ck.h"

/* As nvcc -ptx writes a call of the device runtime's
 * cudaGraphSetConditional (an .extern .func and a call sequence). */
static const char k_ptx[] =
    ".version 8.0\n.target sm_80\n.address_size 64\n"
    ".extern .func cudaGraphSetConditional\n(\n"
    "\t.param .b64 cudaGraphSetConditional_param_0,\n"
    "\t.param .b32 cudaGraphSetConditional_param_1\n)\n;\n"
    /* set_from(h, p): cudaGraphSetConditional(h, *p) */
    ".visible .entry set_from(\n\t.param .u64 set_from_h,\n\t.param .u64 set_from_p\n)\n{\n"
    "\t.reg .b32 %r<2>;\n\t.reg .b64 %rd<4>;\n"
    "\tld.param.u64 %rd1, [set_from_h];\n\tld.param.u64 %rd2, [set_from_p];\n"
    "\tcvta.to.global.u64 %rd3, %rd2;\n\tld.global.u32 %r1, [%rd3];\n"
    "\t{ // callseq 0, 0\n\t.reg .b32 temp_param_reg;\n"
    "\t.param .b64 param0;\n\tst.param.b64 [param0+0], %rd1;\n"
    "\t.param .b32 param1;\n\tst.param.b32 [param1+0], %r1;\n"
    "\tcall.uni \n\tcudaGraphSetConditional, \n\t(\n\tparam0, \n\tparam1\n\t);\n"
    "\t} // callseq 0\n\tret;\n}\n"
    /* dec_set(h, p): *p -= 1; cudaGraphSetConditional(h, *p) */
    ".visible .entry dec_set(\n\t.param .u64 dec_set_h,\n\t.param .u64 dec_set_p\n)\n{\n"
    "\t.reg .b32 %r<3>;\n\t.reg .b64 %rd<4>;\n"
    "\tld.param.u64 %rd1, [dec_set_h];\n\tld.param.u64 %rd2, [dec_set_p];\n"
    "\tcvta.to.global.u64 %rd3, %rd2;\n\tld.global.u32 %r1, [%rd3];\n"
    "\tadd.s32 %r2, %r1, -1;\n\tst.global.u32 [%rd3], %r2;\n"
    "\t{\n\t.param .b64 param0;\n\tst.param.b64 [param0+0], %rd1;\n"
    "\t.param .b32 param1;\n\tst.param.b32 [param1+0], %r2;\n"
    "\tcall.uni cudaGraphSetConditional, (param0, param1);\n\t}\n\tret;\n}\n"
    /* bump(p): *p += 1 */
    ".visible .entry bump(\n\t.param .u64 bump_p\n)\n{\n"
    "\t.reg .b32 %r<3>;\n\t.reg .b64 %rd<3>;\n"
    "\tld.param.u64 %rd1, [bump_p];\n\tcvta.to.global.u64 %rd2, %rd1;\n"
    "\tld.global.u32 %r1, [%rd2];\n\tadd.s32 %r2, %r1, 1;\n\tst.global.u32 [%rd2], %r2;\n"
    "\tret;\n}\n"
    /* put(p, v): *p = v */
    ".visible .entry put(\n\t.param .u64 put_p,\n\t.param .u32 put_v\n)\n{\n"
    "\t.reg .b32 %r<2>;\n\t.reg .b64 %rd<3>;\n"
    "\tld.param.u64 %rd1, [put_p];\n\tld.param.u32 %r1, [put_v];\n"
    "\tcvta.to.global.u64 %rd2, %rd1;\n\tst.global.u32 [%rd2], %r1;\n\tret;\n}\n";

static CUcontext g_ctx;
static CUfunction f_set, f_dec, f_bump, f_put;
static CUdeviceptr g_mem; /* 16 words */

static void start(void)
{
    CUdevice d;
    CUmodule m;
    CK(cuInit(0));
    CK(cuDeviceGet(&d, 0));
    CK(cuDevicePrimaryCtxRetain(&g_ctx, d));
    CK(cuCtxSetCurrent(g_ctx));
    CK(cuModuleLoadData(&m, k_ptx));
    CK(cuModuleGetFunction(&f_set, m, "set_from"));
    CK(cuModuleGetFunction(&f_dec, m, "dec_set"));
    CK(cuModuleGetFunction(&f_bump, m, "bump"));
    CK(cuModuleGetFunction(&f_put, m, "put"));
    CK(cuMemAlloc_v2(&g_mem, 64));
    CK(cuMemsetD32_v2(g_mem, 0, 16));
}

TestSuite(cond, .init = start);

static CUdeviceptr word(int i)
{
    return g_mem + 4u * (unsigned)i;
}

static void poke(int i, uint32_t v)
{
    CK(cuMemcpyHtoD_v2(word(i), &v, sizeof v));
}

static uint32_t peek(int i)
{
    uint32_t v;
    CK(cuCtxSynchronize());
    CK(cuMemcpyDtoH_v2(&v, word(i), sizeof v));
    return v;
}

static CUgraphNode kernel(CUgraph g, const CUgraphNode *deps, size_t n, CUfunction f,
                          void **args)
{
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.func = f;
    p.gridDimX = p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = p.blockDimY = p.blockDimZ = 1;
    p.kernelParams = args;
    CUgraphNode node;
    CK(cuGraphAddKernelNode_v2(&node, g, deps, n, &p));
    return node;
}

static CUgraphNode k_set(CUgraph g, const CUgraphNode *deps, size_t n, CUgraphConditionalHandle *h,
                         int w)
{
    static CUdeviceptr ptrs[16];
    ptrs[w] = word(w);
    void *args[] = {h, &ptrs[w]};
    return kernel(g, deps, n, f_set, args);
}

static CUgraphNode k_put(CUgraph g, const CUgraphNode *deps, size_t n, int w, uint32_t v)
{
    CUdeviceptr p = word(w);
    void *args[] = {&p, &v};
    return kernel(g, deps, n, f_put, args);
}

static CUgraphNode k_bump(CUgraph g, const CUgraphNode *deps, size_t n, int w)
{
    CUdeviceptr p = word(w);
    void *args[] = {&p};
    return kernel(g, deps, n, f_bump, args);
}

static CUgraphNode k_dec(CUgraph g, const CUgraphNode *deps, size_t n, CUgraphConditionalHandle *h,
                         int w)
{
    CUdeviceptr p = word(w);
    void *args[] = {h, &p};
    return kernel(g, deps, n, f_dec, args);
}

/* A conditional node; its bodies into bodies[]. */
static CUresult add_cond(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
                         CUgraphConditionalHandle h, CUgraphConditionalNodeType type,
                         unsigned size, CUgraph *bodies)
{
    CUgraphNodeParams p;
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    p.conditional.handle = h;
    p.conditional.type = type;
    p.conditional.size = size;
    p.conditional.ctx = g_ctx;
    CUresult r = cuGraphAddNode_v2(out, g, deps, NULL, n, &p);
    if (r == CUDA_SUCCESS && bodies)
        for (unsigned i = 0; i < size; i++)
            bodies[i] = p.conditional.phGraph_out[i];
    return r;
}

static void run(CUgraph g)
{
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g, 0));
    CK(cuGraphLaunch(x, NULL));
    CK(cuCtxSynchronize());
    CK(cuGraphExecDestroy(x));
}

/* cuGraphConditionalHandleCreate: "flags - Currently must be
 * CU_GRAPH_COND_ASSIGN_DEFAULT or 0". */
Test(cond, handle_create_checks_its_arguments)
{
    CUgraph g;
    CUgraphConditionalHandle h = 0;
    CK(cuGraphCreate(&g, 0));
    CKE(cuGraphConditionalHandleCreate(&h, g, g_ctx, 0, 2), CUDA_ERROR_INVALID_VALUE);
    CKE(cuGraphConditionalHandleCreate(NULL, g, g_ctx, 0, 0), CUDA_ERROR_INVALID_VALUE);
    CKE(cuGraphConditionalHandleCreate(&h, NULL, g_ctx, 0, 0), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(h, 0, "an output written on failure");
    CK(cuGraphConditionalHandleCreate(&h, g, g_ctx, 0, CU_GRAPH_COND_ASSIGN_DEFAULT));
    cr_assert_neq(h, 0);
    CK(cuGraphDestroy(g));
}

/* CUDA_CONDITIONAL_NODE_PARAMS.size: "1 for CU_GRAPH_COND_TYPE_WHILE, 1 or 2
 * for CU_GRAPH_COND_TYPE_IF, or any value greater than zero for
 * CU_GRAPH_COND_TYPE_SWITCH"; phGraph_out: a CUDA-owned array of them. */
Test(cond, node_sizes_and_bodies)
{
    CUgraph g, b[4];
    CUgraphNode n;
    CUgraphConditionalHandle h;
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphConditionalHandleCreate(&h, g, g_ctx, 0, 0));
    CKE(add_cond(&n, g, NULL, 0, h, CU_GRAPH_COND_TYPE_IF, 3, NULL), CUDA_ERROR_INVALID_VALUE);
    CKE(add_cond(&n, g, NULL, 0, h, CU_GRAPH_COND_TYPE_WHILE, 2, NULL), CUDA_ERROR_INVALID_VALUE);
    CKE(add_cond(&n, g, NULL, 0, h, CU_GRAPH_COND_TYPE_SWITCH, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    CKE(add_cond(&n, g, NULL, 0, 0, CU_GRAPH_COND_TYPE_IF, 1, NULL), CUDA_ERROR_INVALID_VALUE);
    CK(add_cond(&n, g, NULL, 0, h, CU_GRAPH_COND_TYPE_SWITCH, 4, b));
    for (int i = 0; i < 4; i++) {
        cr_assert_neq(b[i], NULL);
        size_t k = 99;
        CK(cuGraphGetNodes(b[i], NULL, &k)); /* a graph, empty */
        cr_assert_eq(k, 0);
        for (int j = 0; j < i; j++)
            cr_assert_neq(b[i], b[j]);
    }
    CUgraphNodeType t;
    CK(cuGraphNodeGetType(n, &t));
    cr_assert_eq(t, CU_GRAPH_NODE_TYPE_CONDITIONAL);
    /* the bodies are the node's */
    CKE(cuGraphDestroy(b[0]), CUDA_ERROR_INVALID_VALUE);
    CK(cuGraphDestroy(g));
}

/* IF: "Body[0] executed if condition is non-zero. If size == 2, an
 * optional ELSE graph is created and this is executed if the condition is
 * zero." The value comes from a kernel before the node. */
Test(cond, if_else_follows_the_value_set_from_device_code)
{
    CUgraph g, b[2];
    CUgraphNode set, n;
    CUgraphConditionalHandle h;
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphConditionalHandleCreate(&h, g, g_ctx, 0, 0));
    set = k_set(g, NULL, 0, &h, 0);
    CK(add_cond(&n, g, &set, 1, h, CU_GRAPH_COND_TYPE_IF, 2, b));
    k_put(b[0], NULL, 0, 1, 7);
    k_put(b[1], NULL, 0, 1, 9);
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g, 0));
    poke(0, 3);
    CK(cuGraphLaunch(x, NULL));
    cr_assert_eq(peek(1), 7, "the then body runs for a non-zero value");
    poke(0, 0);
    CK(cuGraphLaunch(x, NULL));
    cr_assert_eq(peek(1), 9, "the else body runs for zero");
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
}

/* WHILE: "Body executed repeatedly while condition value is non-zero",
 * tested before each iteration (programming guide): a body that counts a
 * word down and sets the value to what is left runs that many times. */
Test(cond, while_runs_until_device_code_clears_the_value)
{
    CUgraph g, b = NULL;
    CUgraphNode n, d;
    CUgraphConditionalHandle h;
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphConditionalHandleCreate(&h, g, g_ctx, 1, CU_GRAPH_COND_ASSIGN_DEFAULT));
    CK(add_cond(&n, g, NULL, 0, h, CU_GRAPH_COND_TYPE_WHILE, 1, &b));
    d = k_dec(b, NULL, 0, &h, 2);
    k_bump(b, &d, 1, 3);
    poke(2, 5);
    poke(3, 0);
    run(g);
    cr_assert_eq(peek(3), 5, "5 iterations");
    cr_assert_eq(peek(2), 0);
    CK(cuGraphDestroy(g));
}

/* The value is checked before the first iteration too: a default of 0
 * runs the body no time. */
Test(cond, while_with_zero_runs_no_iteration)
{
    CUgraph g, b = NULL;
    CUgraphNode n;
    CUgraphConditionalHandle h;
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphConditionalHandleCreate(&h, g, g_ctx, 0, CU_GRAPH_COND_ASSIGN_DEFAULT));
    CK(add_cond(&n, g, NULL, 0, h, CU_GRAPH_COND_TYPE_WHILE, 1, &b));
    k_bump(b, NULL, 0, 4);
    poke(4, 0);
    run(g);
    cr_assert_eq(peek(4), 0);
    CK(cuGraphDestroy(g));
}

/* SWITCH: "Body[n] is executed once, where 'n' is the value of the
 * condition. If the condition does not match a body index, no body is
 * launched." */
Test(cond, switch_runs_the_body_the_value_names)
{
    CUgraph g, b[3];
    CUgraphNode set, n;
    CUgraphConditionalHandle h;
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphConditionalHandleCreate(&h, g, g_ctx, 0, 0));
    set = k_set(g, NULL, 0, &h, 5);
    CK(add_cond(&n, g, &set, 1, h, CU_GRAPH_COND_TYPE_SWITCH, 3, b));
    for (int i = 0; i < 3; i++)
        k_bump(b[i], NULL, 0, 6 + i);
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g, 0));
    uint32_t values[] = {1, 2, 3, 7, 2};
    for (int i = 0; i < 5; i++) {
        poke(5, values[i]);
        CK(cuGraphLaunch(x, NULL));
    }
    cr_assert_eq(peek(6), 0);
    cr_assert_eq(peek(7), 1);
    cr_assert_eq(peek(8), 2, "body 2 ran twice; values 3 and 7 match no body");
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
}

/* defaultLaunchValue: "Applied at the beginning of each graph execution if
 * CU_GRAPH_COND_ASSIGN_DEFAULT is set"; without it the value a kernel set
 * stays for the next launch. The body clears it each time. */
Test(cond, default_is_reapplied_at_each_launch_only_with_the_flag)
{
    for (int flag = 0; flag < 2; flag++) {
        CUgraph g, b = NULL;
        CUgraphNode n;
        CUgraphConditionalHandle h;
        CK(cuGraphCreate(&g, 0));
        CK(cuGraphConditionalHandleCreate(&h, g, g_ctx, 1,
                                          flag ? CU_GRAPH_COND_ASSIGN_DEFAULT : 0));
        CK(add_cond(&n, g, NULL, 0, h, CU_GRAPH_COND_TYPE_IF, 1, &b));
        poke(9, 0);
        CUgraphNode s = k_set(b, NULL, 0, &h, 9); /* sets 0 */
        k_bump(b, &s, 1, 10);
        poke(10, 0);
        CUgraphExec x;
        CK(cuGraphInstantiateWithFlags(&x, g, 0));
        for (int i = 0; i < 3; i++)
            CK(cuGraphLaunch(x, NULL));
        cr_assert_eq(peek(10), flag ? 3u : 1u, "flag %d", flag);
        CK(cuGraphExecDestroy(x));
        CK(cuGraphDestroy(g));
    }
}

/* Bodies nest: an IF inside a WHILE, its handle made for the outer graph
 * ("associated with a conditional node in this graph or one of its
 * children"). The loop runs 4 times; the IF's body on the odd counts. */
Test(cond, conditionals_nest)
{
    CUgraph g, wb = NULL, ib = NULL;
    CUgraphNode n, d, in;
    CUgraphConditionalHandle hw, hi;
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphConditionalHandleCreate(&hw, g, g_ctx, 1, CU_GRAPH_COND_ASSIGN_DEFAULT));
    CK(cuGraphConditionalHandleCreate(&hi, g, g_ctx, 0, 0));
    CK(add_cond(&n, g, NULL, 0, hw, CU_GRAPH_COND_TYPE_WHILE, 1, &wb));
    d = k_dec(wb, NULL, 0, &hw, 11);          /* count down word 11 */
    CUgraphNode s = k_dec(wb, &d, 1, &hi, 12); /* word 12: 4,3,2,1 -> 3,2,1,0 */
    CK(add_cond(&in, wb, &s, 1, hi, CU_GRAPH_COND_TYPE_IF, 1, &ib));
    k_bump(ib, NULL, 0, 13);
    poke(11, 4);
    poke(12, 4);
    poke(13, 0);
    run(g);
    cr_assert_eq(peek(13), 3, "the IF ran while word 12 was not yet 0 (3 of 4)");
    cr_assert_eq(peek(11), 0);
    CK(cuGraphDestroy(g));
}

/* cuGraphConditionalHandleCreate: "Handles not associated with a
 * conditional node may cause graph instantiation to fail"
 * (CUDA_GRAPH_INSTANTIATE_CONDITIONAL_HANDLE_UNUSED); CU_GRAPH_NODE_TYPE_
 * CONDITIONAL: "Only one instantiation of the graph may exist at any point
 * in time. The graph cannot be cloned." */
Test(cond, instantiation_rules)
{
    CUgraph g, b = NULL, c;
    CUgraphNode n;
    CUgraphConditionalHandle h, unused;
    CUgraphExec x, y;
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphConditionalHandleCreate(&h, g, g_ctx, 0, 0));
    CK(cuGraphConditionalHandleCreate(&unused, g, g_ctx, 0, 0));
    CK(add_cond(&n, g, NULL, 0, h, CU_GRAPH_COND_TYPE_IF, 1, &b));
    k_bump(b, NULL, 0, 14);
    CUDA_GRAPH_INSTANTIATE_PARAMS ip;
    memset(&ip, 0, sizeof ip);
    cr_assert_neq(cuGraphInstantiateWithParams(&x, g, &ip), CUDA_SUCCESS);
    cr_assert_eq(ip.result_out, CUDA_GRAPH_INSTANTIATE_CONDITIONAL_HANDLE_UNUSED);
    CK(add_cond(&n, g, NULL, 0, unused, CU_GRAPH_COND_TYPE_IF, 1, NULL));
    CK(cuGraphInstantiateWithFlags(&x, g, 0));
    cr_assert_neq(cuGraphInstantiateWithFlags(&y, g, 0), CUDA_SUCCESS, "a second instantiation");
    cr_assert_neq(cuGraphClone(&c, g), CUDA_SUCCESS, "a clone");
    CK(cuGraphExecDestroy(x));
    CK(cuGraphInstantiateWithFlags(&y, g, 0)); /* the first one is gone */
    CK(cuGraphExecDestroy(y));
    CK(cuGraphDestroy(g));
}

/* A handle belongs to its graph: a conditional node of another graph may
 * not name it. */
Test(cond, handle_of_another_graph_is_refused)
{
    CUgraph g1, g2;
    CUgraphNode n;
    CUgraphConditionalHandle h;
    CK(cuGraphCreate(&g1, 0));
    CK(cuGraphCreate(&g2, 0));
    CK(cuGraphConditionalHandleCreate(&h, g1, g_ctx, 0, 0));
    CKE(add_cond(&n, g2, NULL, 0, h, CU_GRAPH_COND_TYPE_IF, 1, NULL), CUDA_ERROR_INVALID_VALUE);
    CK(cuGraphDestroy(g1));
    CK(cuGraphDestroy(g2));
}

/* The programming guide's way to build a conditional in a capture:
 * cuStreamGetCaptureInfo_v3 gives the capture's graph and dependencies,
 * the node is added to it, cuStreamUpdateCaptureDependencies_v2 makes it
 * the stream's dependency, and cuStreamBeginCaptureToGraph fills a body
 * from another stream. */
Test(cond, capture_builds_a_conditional_and_its_body)
{
    CUstream s, bs;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&bs, CU_STREAM_NON_BLOCKING));
    CK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUdeviceptr p15 = word(15);
    uint32_t one = 1;
    void *pargs[] = {&p15, &one};
    CK(cuLaunchKernel(f_put, 1, 1, 1, 1, 1, 1, 0, s, pargs, NULL));
    CUstreamCaptureStatus st;
    cuuint64_t id = 0;
    CUgraph g = NULL;
    const CUgraphNode *deps = NULL;
    const CUgraphEdgeData *edges = NULL;
    size_t nd = 0;
    CK(cuStreamGetCaptureInfo_v3(s, &st, &id, &g, &deps, &edges, &nd));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    cr_assert(g && id);
    cr_assert_eq(nd, 1, "the kernel is the next node's dependency");
    cr_assert(edges && !edges[0].from_port && !edges[0].to_port && !edges[0].type);
    CUgraphConditionalHandle h;
    CK(cuGraphConditionalHandleCreate(&h, g, g_ctx, 3, CU_GRAPH_COND_ASSIGN_DEFAULT));
    CUgraphNode n;
    CUgraph b[4];
    CK(add_cond(&n, g, deps, nd, h, CU_GRAPH_COND_TYPE_SWITCH, 4, b));
    CKE(cuStreamUpdateCaptureDependencies_v2(s, &n, NULL, 1, 7), CUDA_ERROR_INVALID_VALUE);
    CK(cuStreamUpdateCaptureDependencies_v2(s, &n, NULL, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES));
    CK(cuStreamGetCaptureInfo_v3(s, &st, NULL, NULL, &deps, NULL, &nd));
    cr_assert(nd == 1 && deps[0] == n);
    /* body 3 (the default value's) captured from bs */
    CK(cuStreamBeginCaptureToGraph(bs, b[3], NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUdeviceptr p14 = word(14);
    void *bargs[] = {&p14};
    CK(cuLaunchKernel(f_bump, 1, 1, 1, 1, 1, 1, 0, bs, bargs, NULL));
    CK(cuLaunchKernel(f_bump, 1, 1, 1, 1, 1, 1, 0, bs, bargs, NULL));
    CK(cuStreamEndCapture(bs, NULL));
    size_t nn = 0;
    CK(cuGraphGetNodes(b[3], NULL, &nn));
    cr_assert_eq(nn, 2, "both captured kernels are in the body");
    /* and the capture of s goes on after the node */
    void *margs[] = {&p15};
    CK(cuLaunchKernel(f_bump, 1, 1, 1, 1, 1, 1, 0, s, margs, NULL));
    CUgraph out;
    CK(cuStreamEndCapture(s, &out));
    cr_assert_eq(out, g);
    nn = 0;
    CK(cuGraphGetNodes(g, NULL, &nn));
    cr_assert_eq(nn, 3);
    poke(14, 0);
    run(g);
    cr_assert_eq(peek(15), 2, "put 1, then bump after the conditional");
    cr_assert_eq(peek(14), 2, "body 3 ran once (two bumps)");
    CK(cuGraphDestroy(g));
    CK(cuStreamDestroy_v2(s));
    CK(cuStreamDestroy_v2(bs));
}

/* One graph of the shape the update test uses: set (from word 0) -> IF,
 * its body putting `v` into word 1. */
static CUgraph if_graph(uint32_t v, CUgraphConditionalHandle *h)
{
    CUgraph g, b = NULL;
    CUgraphNode set, n;
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphConditionalHandleCreate(h, g, g_ctx, 0, 0));
    set = k_set(g, NULL, 0, h, 0);
    CK(add_cond(&n, g, &set, 1, *h, CU_GRAPH_COND_TYPE_IF, 1, &b));
    k_put(b, NULL, 0, 1, v);
    return g;
}

/* cuGraphExecUpdate, conditional nodes: "Changing node parameters is not
 * supported. Changing parameters of nodes within the conditional body graph
 * is subject to the rules above. Conditional handle flags and default
 * values are updated as part of the graph update." A re-made graph of the
 * same shape updates the exec: its body's kernel runs with the new
 * argument, and the node follows the value the new graph's kernel sets on
 * the new graph's handle. Another type of conditional is refused. */
Test(cond, exec_update_takes_the_bodies_and_handles_of_the_new_graph)
{
    static CUgraphConditionalHandle ha, hb; /* kernel arguments until the launch */
    CUgraph a = if_graph(7, &ha), b = if_graph(9, &hb);
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, a, 0));
    poke(0, 1);
    CK(cuGraphLaunch(x, NULL));
    cr_assert_eq(peek(1), 7);
    CUgraphExecUpdateResultInfo info;
    CK(cuGraphExecUpdate_v2(x, b, &info));
    cr_assert_eq(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
    poke(1, 0);
    CK(cuGraphLaunch(x, NULL));
    cr_assert_eq(peek(1), 9, "the new body's argument, on the new graph's handle");
    poke(0, 0);
    poke(1, 0);
    CK(cuGraphLaunch(x, NULL));
    cr_assert_eq(peek(1), 0, "value 0: the IF's body does not run");
    /* a WHILE where the IF was: refused */
    CUgraph c;
    CUgraphNode set, n;
    CUgraphConditionalHandle hc;
    CK(cuGraphCreate(&c, 0));
    CK(cuGraphConditionalHandleCreate(&hc, c, g_ctx, 0, 0));
    set = k_set(c, NULL, 0, &hc, 0);
    CK(add_cond(&n, c, &set, 1, hc, CU_GRAPH_COND_TYPE_WHILE, 1, NULL));
    CKE(cuGraphExecUpdate_v2(x, c, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    cr_assert_eq(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED);
    cr_assert_eq(info.errorNode, n);
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(a));
    CK(cuGraphDestroy(b));
    CK(cuGraphDestroy(c));
}

/* The older flavours a runtime may ask for (NVIDIA's 13.0 runtime asks for
 * each, tests/data/cudart-13.0.88-lookups.txt): cuGraphAddNode without edge
 * data, cuStreamGetCaptureInfo_v2 and cuStreamUpdateCaptureDependencies
 * (flags 0: "defaults to CU_STREAM_ADD_CAPTURE_DEPENDENCIES"), and the
 * 10010 cuStreamGetCaptureInfo. */
Test(cond, older_flavours)
{
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUstreamCaptureStatus st;
    cuuint64_t id = 0;
    CK(cuStreamGetCaptureInfo(s, &st, &id));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_NONE);
    CKE(cuStreamUpdateCaptureDependencies(s, NULL, 0, 0), CUDA_ERROR_ILLEGAL_STATE);
    CK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CK(cuStreamGetCaptureInfo(s, &st, &id));
    cr_assert(st == CU_STREAM_CAPTURE_STATUS_ACTIVE && id != 0);
    CUdeviceptr p = word(3);
    void *args[] = {&p};
    CK(cuLaunchKernel(f_bump, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    CUgraph g;
    const CUgraphNode *deps;
    size_t nd = 0;
    CK(cuStreamGetCaptureInfo_v2(s, &st, NULL, &g, &deps, &nd));
    cr_assert_eq(nd, 1);
    CUgraphNode k = deps[0], e;
    CUgraphNodeParams ep;
    memset(&ep, 0, sizeof ep);
    ep.type = CU_GRAPH_NODE_TYPE_EMPTY;
    CK(cuGraphAddNode(&e, g, NULL, 0, &ep));
    CK(cuStreamUpdateCaptureDependencies(s, &e, 1, 0));
    CK(cuStreamGetCaptureInfo_v2(s, &st, NULL, NULL, &deps, &nd));
    cr_assert(nd == 2 && deps[0] == k && deps[1] == e, "added to the set");
    CK(cuLaunchKernel(f_bump, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    CUgraph out;
    CK(cuStreamEndCapture(s, &out));
    poke(3, 0);
    run(out);
    cr_assert_eq(peek(3), 2);
    CK(cuGraphDestroy(out));
    CK(cuStreamDestroy_v2(s));
}
