/* A library that is not the driver but exports a driver name, as mocks and
 * other interposers do: dlsym on its handle must return its own function,
 * never the shim's wrapper. */
#include <cuda.h>

__attribute__((visibility("default"))) CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream)
{
    (void)exec;
    (void)stream;
    return (CUresult)777;
}
