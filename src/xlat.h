/* xlat: the pure part of translating a node's argument words.
 *
 * A view maps ranges of the program's addresses to slice addresses. Each
 * range is [lo, hi] with hi = base + size included (one past the end belongs
 * to its allocation, so a [begin, end) pair stays a pair) and lies at va:
 * a word w with lo <= w <= hi becomes va + (w - lo); any other word is left
 * as it is. The ranges of a view are sorted by lo and disjoint, hi included
 * (VMM-backed allocations keep a guard gap after their end, so no range
 * starts at another's hi).
 *
 * vr_xlat_args copies a node's argument bytes and hands each anchor word
 * (and only those) to a translation function; every other byte, the words
 * that are not anchors included, is copied as the program wrote it.
 * No driver calls, no allocation, no global state.
 */
#ifndef VR_XLAT_H
#define VR_XLAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct vr_xlat_range {
    uint64_t lo, hi, va; /* [lo, hi] -> [va, va + (hi - lo)] */
    size_t slot;         /* the owner's index, carried along */
};

/* The range holding w, or NULL. r: n ranges as described above. */
const struct vr_xlat_range *vr_xlat_lookup(const struct vr_xlat_range *r, size_t n, uint64_t w);

/* w through the ranges: its slice address, or w itself. */
uint64_t vr_xlat_word(const struct vr_xlat_range *r, size_t n, uint64_t w);

/* An anchor table entry: the owner's index (>= 0, at most VR_ANCHOR_MAX)
 * or -1. Two bytes, as there is one per scanned word of every node. */
typedef int16_t vr_anchor;
#define VR_ANCHOR_MAX INT16_MAX

/* Translates the word at an anchor position. `anchor` is the position's
 * value in the anchor table (>= 0). */
typedef uint64_t (*vr_xlat_fn)(void *ctx, int32_t anchor, uint64_t word);

/* dst[0..bytes) = src[0..bytes), then for each k < nwords with
 * anchor[k] >= 0 the 8-byte word at offs[k] (offs[k] + 8 <= bytes) becomes
 * fn(ctx, anchor[k], word). src and dst must not overlap. */
void vr_xlat_args(const uint32_t *offs, const vr_anchor *anchor, uint32_t nwords, size_t bytes,
                  const uint8_t *src, uint8_t *dst, vr_xlat_fn fn, void *ctx);

/* Pairs stay pairs (issue 30): a kernel may use the difference of two words
 * into one allocation ([begin, end), end = base + size included). After
 * vr_xlat_args, where one word into a translated range was translated and
 * another word into it was not, or by another distance (a word that is no
 * anchor, or anchors of two slots holding one buffer), every word of the
 * node into that range is put back as the program wrote it: all of them or
 * none. range(ctx, w, t, lo, hi) gives the program addresses [lo, hi] the
 * translated word t (from w) stands for, false when t was not translated
 * into a range (the caller's slot window: padding and the guard gap after
 * it are the shim's, no program word points there but the end pointer). */
typedef bool (*vr_xlat_range_fn)(void *ctx, uint64_t w, uint64_t t, uint64_t *lo, uint64_t *hi);
void vr_xlat_keep_pairs(const uint32_t *offs, uint32_t nwords, const uint8_t *src, uint8_t *dst,
                        vr_xlat_range_fn range, void *ctx);

#endif
