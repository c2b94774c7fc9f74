/* The masked CRC-32C of TFRecord (crc.py's, google_crc32c's): slicing-by-8 tables, and the SSE4.2
 * instruction where the CPU has it (chosen once, at import, by kernel_crc_init).
 *
 * The framing functions call kernel_masked_crc once per header and once per record; it stays
 * an ordinary function here (as it was when the kernel was one file: the compiler did not
 * inline it), and the SSE4.2 body cannot be inlined into code built without that target.
 */
#include "_kernel.h"

#define MASK_DELTA 0xA282EAD8u

static uint32_t table[8][256];

static void make_tables(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ ((c & 1) ? 0x82F63B78u : 0);
        table[0][i] = c;
    }
    for (int k = 1; k < 8; k++)
        for (int i = 0; i < 256; i++)
            table[k][i] = (table[k - 1][i] >> 8) ^ table[0][table[k - 1][i] & 0xFF];
}

static uint32_t crc_soft(const uint8_t *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= c;
        c = table[7][w & 0xFF] ^ table[6][(w >> 8) & 0xFF] ^ table[5][(w >> 16) & 0xFF] ^
            table[4][(w >> 24) & 0xFF] ^ table[3][(w >> 32) & 0xFF] ^
            table[2][(w >> 40) & 0xFF] ^ table[1][(w >> 48) & 0xFF] ^ table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) c = table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return ~c;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw(const uint8_t *p, size_t n) {
    uint64_t c = 0xFFFFFFFFu;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
    return ~c32;
}
#define HAVE_HW 1
#else
#define HAVE_HW 0
#endif

static int use_hw = 0;

uint32_t kernel_masked_crc(const uint8_t *p, size_t n) {
#if HAVE_HW
    uint32_t c = use_hw ? crc_hw(p, n) : crc_soft(p, n);
#else
    uint32_t c = crc_soft(p, n);
#endif
    return ((c >> 15) | (c << 17)) + MASK_DELTA;
}

void kernel_crc_init(void) {
    make_tables();
#if HAVE_HW
    __builtin_cpu_init();
    use_hw = __builtin_cpu_supports("sse4.2");
#endif
}
