/* simcudart: the PTX inside an nvcc fatbin.
 *
 * nvcc embeds, per compilation unit, a wrapper { magic 0x466243b1, version,
 * data, filename } (fatbinary_section.h) whose data is a fatbin container:
 * a 16-byte header (u32 magic 0xBA55ED50, u16 version, u16 header size, u64
 * size of the entries) followed by entries, each with its own header (u16
 * kind: 1 PTX, 2 ELF; u16 version; u32 header size; u64 padded payload size;
 * at byte 28 a u32 architecture) and its payload. CUDA 13 compresses PTX
 * with zstd by default; a payload that starts a zstd frame is decompressed,
 * anything else is taken as PTX text. simcuda loads PTX only, so ELF entries
 * are skipped. Field positions beyond these are not relied on. */
#include "rt.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#define WRAPPER_MAGIC 0x466243b1u
#define FATBIN_MAGIC 0xBA55ED50u
#define KIND_PTX 1

struct wrapper {
    int magic;
    int version;
    const unsigned long long *data;
    void *filename_or_fatbins;
};

static uint32_t rd32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint64_t rd64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static int ptx_text(const unsigned char *p, size_t n, char **out)
{
    static const unsigned char zmagic[4] = { 0x28, 0xb5, 0x2f, 0xfd };
    if (n >= 4 && memcmp(p, zmagic, 4) == 0) {
        size_t frame = ZSTD_findFrameCompressedSize(p, n);
        if (ZSTD_isError(frame))
            return -EINVAL;
        unsigned long long size = ZSTD_getFrameContentSize(p, frame);
        if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN || size > (1ull << 31))
            return -EINVAL;
        char *t = malloc((size_t)size + 1);
        if (!t)
            return -ENOMEM;
        size_t got = ZSTD_decompress(t, (size_t)size, p, frame);
        if (ZSTD_isError(got)) {
            free(t);
            return -EINVAL;
        }
        t[got] = '\0';
        *out = t;
        return 0;
    }
    size_t len = strnlen((const char *)p, n); /* the payload is padded with NULs */
    char *t = malloc(len + 1);
    if (!t)
        return -ENOMEM;
    memcpy(t, p, len);
    t[len] = '\0';
    *out = t;
    return 0;
}

int rt_fatbin_ptx(const void *wrapper, char **ptx)
{
    const struct wrapper *w = wrapper;
    if (!w || (uint32_t)w->magic != WRAPPER_MAGIC || !w->data)
        return -EINVAL;
    const unsigned char *fb = (const unsigned char *)w->data;
    if (rd32(fb) != FATBIN_MAGIC)
        return -EINVAL;
    size_t hsize = (size_t)(fb[6] | fb[7] << 8);
    uint64_t total = rd64(fb + 8);
    const unsigned char *e = fb + hsize, *end = fb + hsize + total;
    const unsigned char *best = NULL;
    uint32_t best_arch = 0;
    size_t best_len = 0;
    while (e + 32 <= end) {
        uint16_t kind = (uint16_t)(e[0] | e[1] << 8);
        uint32_t ehsize = rd32(e + 4);
        uint64_t psize = rd64(e + 8);
        if (ehsize < 32 || psize > (uint64_t)(end - e) - ehsize)
            return -EINVAL;
        uint32_t arch = rd32(e + 28);
        if (kind == KIND_PTX && (!best || arch > best_arch)) {
            best = e + ehsize;
            best_len = (size_t)psize;
            best_arch = arch;
        }
        e += ehsize + psize;
    }
    if (!best)
        return -ENOENT;
    return ptx_text(best, best_len, ptx);
}
