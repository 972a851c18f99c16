/* A stand-in libcuda.so.1 for tests: answers the driver-API calls the agent's children make (the speed
 * tier's driver child, the ptx load engine) with a virtual GPU clock, so that their figures come out
 * known. There is no GPU here; nothing is copied and no kernel runs.
 *
 * Rates (environment, read at cuInit): CUDA_SHIM_HBM_BPS (device-to-device copy, bytes read + written
 * per second), CUDA_SHIM_H2D_BPS, CUDA_SHIM_D2H_BPS, CUDA_SHIM_FP32_FLOPS (a kernel's time is its
 * fma.rn.f32 count inside its loop, read from the PTX, x 2 x threads x the iterations parameter);
 * CUDA_SHIM_UUID (the one device's UUID as NVML writes it), CUDA_SHIM_SMS (SM count), CUDA_SHIM_LOG
 * (a file to append one line per cuInit and per timed operation to).
 * cuCtxSynchronize sleeps the virtual time queued since the last one (at most 0.2 s): a load loop
 * paces itself as on a GPU instead of spinning. Build: gcc -shared -fPIC -O1 -o libcuda.so.1 cuda_shim.c
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static double vclock, synced;  /* virtual GPU seconds: now, and at the last cuCtxSynchronize */
static double hbm_bps = 3.2e12, h2d_bps = 41.5e9, d2h_bps = 37.25e9, fp32_flops = 44.0e12;
static int sms = 132;
static unsigned char uuid[16];
static CUdeviceptr next_ptr = 0x700000000000ULL;
static int ctx_token, fn_fma_per_iter[64], fn_count;

static double env_rate(const char *name, double fallback) {
    const char *v = getenv(name);
    return v && *v ? strtod(v, NULL) : fallback;
}

static void note(const char *what, double seconds) {
    const char *path = getenv("CUDA_SHIM_LOG");
    if (!path || !*path) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    fprintf(f, "%s %.9f\n", what, seconds);
    fclose(f);
}

static void advance(double seconds) {
    pthread_mutex_lock(&lock);
    vclock += seconds;
    pthread_mutex_unlock(&lock);
}

CUresult cuInit(unsigned flags) {
    (void)flags;
    hbm_bps = env_rate("CUDA_SHIM_HBM_BPS", hbm_bps);
    h2d_bps = env_rate("CUDA_SHIM_H2D_BPS", h2d_bps);
    d2h_bps = env_rate("CUDA_SHIM_D2H_BPS", d2h_bps);
    fp32_flops = env_rate("CUDA_SHIM_FP32_FLOPS", fp32_flops);
    sms = (int)env_rate("CUDA_SHIM_SMS", sms);
    const char *u = getenv("CUDA_SHIM_UUID");  /* GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx */
    if (u && !strncmp(u, "GPU-", 4)) {
        int n = 0;
        for (const char *p = u + 4; *p && n < 32; p++) {
            if (*p == '-') continue;
            char hex[2] = {*p, 0};
            unsigned v = (unsigned)strtoul(hex, NULL, 16);
            uuid[n / 2] = (unsigned char)(n % 2 ? (uuid[n / 2] | v) : (v << 4));
            n++;
        }
    }
    note("cuInit", 0.0);
    return 0;
}

CUresult cuDeviceGetCount(int *count) { *count = 1; return 0; }
CUresult cuDeviceGet(int *dev, int ordinal) { if (ordinal != 0) return 101; *dev = 0; return 0; }
CUresult cuDeviceGetAttribute(int *value, int attr, int dev) {
    (void)dev;
    *value = attr == 16 ? sms : 0;  /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */
    return 0;
}
CUresult cuDeviceGetUuid_v2(unsigned char *out, int dev) { (void)dev; memcpy(out, uuid, 16); return 0; }
CUresult cuDeviceGetUuid(unsigned char *out, int dev) { return cuDeviceGetUuid_v2(out, dev); }
CUresult cuDeviceCanAccessPeer(int *can, int a, int b) { (void)a; (void)b; *can = 0; return 0; }
CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) { (void)dev; *ctx = &ctx_token; return 0; }
CUresult cuDevicePrimaryCtxRelease_v2(int dev) { (void)dev; return 0; }
CUresult cuCtxCreate_v2(void **ctx, unsigned flags, int dev) { (void)flags; (void)dev; *ctx = &ctx_token; return 0; }
CUresult cuCtxSetCurrent(void *ctx) { (void)ctx; return 0; }
CUresult cuCtxEnablePeerAccess(void *ctx, unsigned flags) { (void)ctx; (void)flags; return 0; }
CUresult cuCtxSynchronize(void) {
    pthread_mutex_lock(&lock);
    double wait = vclock - synced;
    synced = vclock;
    pthread_mutex_unlock(&lock);
    if (wait > 0.2) wait = 0.2;
    if (wait > 0) {
        struct timespec ts = {(time_t)wait, (long)((wait - (time_t)wait) * 1e9)};
        nanosleep(&ts, NULL);
    }
    return 0;
}

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
    *free_bytes = (size_t)120 << 30;
    *total = (size_t)141 << 30;
    return 0;
}
CUresult cuMemAlloc_v2(CUdeviceptr *ptr, size_t size) {
    pthread_mutex_lock(&lock);
    *ptr = next_ptr;
    next_ptr += (size + 0xfffff) & ~(CUdeviceptr)0xfffff;
    pthread_mutex_unlock(&lock);
    return 0;
}
CUresult cuMemFree_v2(CUdeviceptr ptr) { (void)ptr; return 0; }
CUresult cuMemAllocHost_v2(void **ptr, size_t size) { (void)size; *ptr = (void *)0x10000; return 0; }
CUresult cuMemFreeHost(void *ptr) { (void)ptr; return 0; }
CUresult cuMemsetD8_v2(CUdeviceptr ptr, unsigned char v, size_t n) { (void)ptr; (void)v; (void)n; return 0; }
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, void *stream) {
    (void)dst; (void)src; (void)stream;
    advance(2.0 * (double)n / hbm_bps);  /* read once, written once */
    return 0;
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, void *stream) {
    (void)dst; (void)src; (void)stream;
    advance((double)n / h2d_bps);
    return 0;
}
CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, void *stream) {
    (void)dst; (void)src; (void)stream;
    advance((double)n / d2h_bps);
    return 0;
}
CUresult cuMemcpyPeerAsync(CUdeviceptr d, void *dc, CUdeviceptr s, void *sc, size_t n, void *st) {
    (void)d; (void)dc; (void)s; (void)sc; (void)n; (void)st;
    return 1;  /* one device: never reached */
}

/* a module is its PTX's count of fma.rn.f32 between the LOOP label and the branch back to it */
CUresult cuModuleLoadData(void **mod, const void *image) {
    const char *ptx = (const char *)image, *loop = strstr(ptx, "LOOP:"), *end = loop ? strstr(loop, "bra LOOP") : NULL;
    int count = 0;
    for (const char *p = loop; p && end && (p = strstr(p, "fma.rn.f32")) && p < end; p++) count++;
    pthread_mutex_lock(&lock);
    int slot = fn_count < 64 ? fn_count++ : 63;
    fn_fma_per_iter[slot] = count;
    pthread_mutex_unlock(&lock);
    *mod = &fn_fma_per_iter[slot];
    return count ? 0 : 218;  /* CUDA_ERROR_INVALID_PTX */
}
CUresult cuModuleGetFunction(void **fn, void *mod, const char *name) { (void)name; *fn = mod; return 0; }
CUresult cuModuleUnload(void *mod) { (void)mod; return 0; }
CUresult cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void *stream, void **params, void **extra) {
    (void)shared; (void)stream; (void)extra;
    uint32_t iters = *(uint32_t *)params[1];
    double flops = 2.0 * *(int *)fn * (double)iters * gx * gy * gz * bx * by * bz;
    advance(flops / fp32_flops);
    note("kernel", flops / fp32_flops);
    return 0;
}

typedef struct { double t; } event_t;
CUresult cuEventCreate(event_t **ev, unsigned flags) { (void)flags; *ev = calloc(1, sizeof(event_t)); return *ev ? 0 : 2; }
CUresult cuEventDestroy_v2(event_t *ev) { free(ev); return 0; }
CUresult cuEventRecord(event_t *ev, void *stream) {
    (void)stream;
    pthread_mutex_lock(&lock);
    ev->t = vclock;
    pthread_mutex_unlock(&lock);
    return 0;
}
CUresult cuEventSynchronize(event_t *ev) { (void)ev; return 0; }
CUresult cuEventElapsedTime(float *ms, event_t *start, event_t *end) {
    *ms = (float)((end->t - start->t) * 1000.0);
    note("elapsed", end->t - start->t);
    return 0;
}
