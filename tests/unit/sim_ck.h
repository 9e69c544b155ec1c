/* sim_ck: the call checks the suites that drive simcuda directly share
 * (test_simcuda, test_simcuda_legacy): CK(call) expects CUDA_SUCCESS,
 * CKE(call, want) a given answer; a miss is a Criterion assertion naming
 * the call and both codes. */
#ifndef VR_SIM_CK_H
#define VR_SIM_CK_H

#include <criterion/criterion.h>
#include <cuda.h>

#define CK(call)                                                               \
    do {                                                                       \
        CUresult ck_r_ = (call);                                               \
        cr_assert_eq(ck_r_, CUDA_SUCCESS, "%s -> %d", #call, (int)ck_r_);      \
    } while (0)

#define CKE(call, want)                                                        \
    do {                                                                       \
        CUresult ck_r_ = (call);                                               \
        cr_assert_eq(ck_r_, (want), "%s -> %d, want %d", #call, (int)ck_r_,   \
                     (int)(want));                                             \
    } while (0)

#endif
