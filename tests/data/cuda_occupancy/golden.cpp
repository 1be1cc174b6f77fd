// Reads "major minor maxThreadsPerBlock maxThreadsPerSM regsPerBlock regsPerSM warpSize smemPerBlock
// smemPerSM smemPerBlockOptin reservedSmemPerBlock threads regs smem" lines on stdin and prints
// "blocks limitingFactors" per line, using NVIDIA's cuda_occupancy.h unchanged (see make_golden.py).
#include <cstdio>
#include <climits>
#include <cuda_occupancy.h>

int main() {
    int major, minor, mtpb, mtps, rpb, rps, ws, threads, regs;
    long spb, sps, optin, reserved, smem;
    while (std::scanf("%d %d %d %d %d %d %d %ld %ld %ld %ld %d %d %ld", &major, &minor, &mtpb, &mtps,
                      &rpb, &rps, &ws, &spb, &sps, &optin, &reserved, &threads, &regs, &smem) == 14) {
        cudaOccDeviceProp p;
        p.computeMajor = major; p.computeMinor = minor; p.maxThreadsPerBlock = mtpb;
        p.maxThreadsPerMultiprocessor = mtps; p.regsPerBlock = rpb; p.regsPerMultiprocessor = rps;
        p.warpSize = ws; p.sharedMemPerBlock = spb; p.sharedMemPerMultiprocessor = sps; p.numSms = 1;
        p.sharedMemPerBlockOptin = optin; p.reservedSharedMemPerBlock = reserved;
        cudaOccFuncAttributes a;  // partitioned GC off, no barriers, no virtual resources
        a.maxThreadsPerBlock = INT_MAX; a.numRegs = regs; a.sharedSizeBytes = smem;
        a.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN; a.maxDynamicSharedSizeBytes = optin;
        cudaOccDeviceState s;  // default carveout, no cache preference
        cudaOccResult r;
        cudaOccError e = cudaOccMaxActiveBlocksPerMultiprocessor(&r, &p, &a, &s, threads, 0);
        if (e != CUDA_OCC_SUCCESS) std::printf("error %d\n", (int)e);
        else std::printf("%d %u\n", r.activeBlocksPerMultiprocessor, r.limitingFactors);
    }
    return 0;
}
